//! IP intelligence, part 2: reputation lists, CIDR lists with a score and a category (Tor
//! exits, scanners, hosting ranges), read by `ip.src.reputation` (the highest score of the
//! lists that contain the client, 0 when none) and `ip.src.category` (that list's
//! category, `""` when none).
//!
//! Each list is an [`IpList`](super::list::IpList) loaded like a `[[list]]` (inline `items`
//! and/or a `file`, reloaded by [`super::Policy::reload`] when the file changes).

use std::net::IpAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::error::{PolicyError, PolicyErrorKind};
use super::list::{List, ListConfig, ListData, ListKind};

/// `[[reputation]]`: one scored list.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReputationConfig {
    /// A name for messages.
    pub name: String,
    /// What the ranges are (`tor`, `scanner`, `hosting`, ...): `ip.src.category`.
    pub category: String,
    /// How bad (1..=100): `ip.src.reputation`.
    pub score: i64,
    /// CIDRs written in the configuration.
    #[serde(default)]
    pub items: Vec<String>,
    /// A file of CIDRs, one per line; reloaded when it changes.
    #[serde(default)]
    pub file: Option<PathBuf>,
}

#[derive(Debug)]
pub(crate) struct Reputation {
    pub(crate) list: List,
    category: String,
    score: i64,
}

impl Reputation {
    pub(crate) fn load(config: &ReputationConfig) -> Result<Reputation, PolicyError> {
        if !(1..=100).contains(&config.score) {
            return Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!(
                    "reputation {:?}: score {} is outside 1..=100",
                    config.name, config.score
                ),
            ));
        }
        let list = List::load(&ListConfig {
            name: config.name.clone(),
            kind: ListKind::Ip,
            items: config.items.clone(),
            file: config.file.clone(),
        })?;
        Ok(Reputation {
            list,
            category: config.category.clone(),
            score: config.score,
        })
    }
}

/// The highest score among `lists` containing `ip`, and its category.
pub(crate) fn lookup(lists: &[Reputation], ip: IpAddr) -> (i64, Option<&str>) {
    let mut best = (0, None);
    for r in lists {
        if r.score > best.0 {
            if let ListData::Ip(l) = &**r.list.data.load() {
                if l.contains(ip) {
                    best = (r.score, Some(r.category.as_str()));
                }
            }
        }
    }
    best
}
