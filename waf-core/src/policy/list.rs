//! Named lists: IP lists (IPv4 and IPv6 CIDRs) and string lists, inline or from files.
//!
//! An [`IpList`] is two sorted vectors of disjoint, non-adjacent ranges (IPv4 as `u32`,
//! IPv6 as `u128`): overlapping and adjacent CIDRs are merged at load, and a lookup is one
//! binary search, so 100,000 entries cost 17 comparisons and 8 bytes (IPv4) or 32 bytes
//! (IPv6) per range. IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) are looked up as
//! IPv4. A [`StringList`] is a hash set of byte strings, matched exactly.
//!
//! Lists that come from files are reloaded by [`super::Policy::reload`], which the host
//! calls off the request path (a timer task); a changed file is parsed into a new list
//! and swapped in atomically (`arc-swap`), so requests in flight keep the list they
//! started with and never wait. A file that fails to parse keeps the old list.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use ipnet::IpNet;
use serde::Deserialize;

use super::error::{PolicyError, PolicyErrorKind};

/// A list in the configuration (`[[list]]`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ListConfig {
    /// The name expressions use (`$office`).
    pub name: String,
    /// `ip` (CIDRs and addresses) or `string`.
    pub kind: ListKind,
    /// Entries written in the configuration.
    #[serde(default)]
    pub items: Vec<String>,
    /// A file with one entry per line (`#` starts a comment); reloaded when it changes.
    #[serde(default)]
    pub file: Option<PathBuf>,
}

/// What a list holds.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ListKind {
    /// IPv4 and IPv6 addresses and CIDRs.
    Ip,
    /// Byte strings, matched exactly.
    String,
}

/// A set of IPv4 and IPv6 ranges with sub-microsecond lookup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpList {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl IpList {
    /// A list from CIDRs (merged, sorted).
    pub fn from_nets(nets: impl IntoIterator<Item = IpNet>) -> IpList {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for net in nets {
            match net {
                IpNet::V4(n) => v4.push((u32::from(n.network()), u32::from(n.broadcast()))),
                IpNet::V6(n) => v6.push((u128::from(n.network()), u128::from(n.broadcast()))),
            }
        }
        IpList {
            v4: merge(v4),
            v6: merge(v6),
        }
    }

    /// Parses one entry per line (`#` comments, blank lines ignored); errors name `source`
    /// and the line and column of the bad entry.
    pub fn parse(source: &str, text: &str) -> Result<IpList, PolicyError> {
        let mut nets = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let body = line.split('#').next().unwrap_or_default();
            let entry = body.trim();
            if entry.is_empty() {
                continue;
            }
            let column = body.find(entry).unwrap_or(0) as u32 + 1;
            let net = parse_net(entry).map_err(|msg| {
                PolicyError::at(
                    PolicyErrorKind::Syntax,
                    source,
                    text,
                    n as u32 + 1,
                    column,
                    msg,
                )
            })?;
            nets.push(net);
        }
        Ok(IpList::from_nets(nets))
    }

    /// Whether `ip` is in the list.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match canonical(ip) {
            IpAddr::V4(a) => find(&self.v4, u32::from(a)),
            IpAddr::V6(a) => find(&self.v6, u128::from(a)),
        }
    }

    /// Number of disjoint ranges after merging.
    pub fn ranges(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    /// Bytes of heap the ranges take.
    pub fn heap_bytes(&self) -> usize {
        self.v4.capacity() * 8 + self.v6.capacity() * 32
    }
}

/// `::ffff:a.b.c.d` as `a.b.c.d`; anything else unchanged.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// An address or CIDR; host bits in a CIDR are cleared (`10.1.2.3/8` is `10.0.0.0/8`).
pub(crate) fn parse_net(entry: &str) -> Result<IpNet, String> {
    if let Ok(net) = entry.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    match entry.parse::<IpAddr>() {
        Ok(ip) => Ok(IpNet::from(ip)),
        Err(_) => Err(format!("{entry:?} is not an IP address or CIDR")),
    }
}

fn merge<T: Copy + Ord + num::One>(mut ranges: Vec<(T, T)>) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        if let Some(last) = out.last_mut() {
            if start <= last.1 || T::succ(last.1) == Some(start) {
                if end > last.1 {
                    last.1 = end;
                }
                continue;
            }
        }
        out.push((start, end));
    }
    out.shrink_to_fit();
    out
}

fn find<T: Copy + Ord>(ranges: &[(T, T)], x: T) -> bool {
    let i = ranges.partition_point(|r| r.0 <= x);
    i > 0 && ranges[i - 1].1 >= x
}

mod num {
    pub(super) trait One: Sized {
        fn succ(self) -> Option<Self>;
    }
    impl One for u32 {
        fn succ(self) -> Option<u32> {
            self.checked_add(1)
        }
    }
    impl One for u128 {
        fn succ(self) -> Option<u128> {
            self.checked_add(1)
        }
    }
}

/// A set of byte strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StringList {
    items: HashSet<Box<[u8]>>,
}

impl StringList {
    /// A list from entries.
    pub fn from_items<I, S>(items: I) -> StringList
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        StringList {
            items: items.into_iter().map(|s| s.as_ref().into()).collect(),
        }
    }

    /// One entry per line, trimmed; `#` comments and blank lines ignored.
    pub fn parse(text: &str) -> StringList {
        StringList::from_items(
            text.lines()
                .map(|l| l.split('#').next().unwrap_or_default().trim())
                .filter(|l| !l.is_empty()),
        )
    }

    /// Whether `value` is in the list.
    pub fn contains(&self, value: &[u8]) -> bool {
        self.items.contains(value)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// A list's contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ListData {
    Ip(IpList),
    Str(StringList),
}

/// A named list whose contents can be swapped while requests read it.
#[derive(Debug)]
pub(crate) struct List {
    pub(crate) name: String,
    pub(crate) kind: ListKind,
    pub(crate) data: ArcSwap<ListData>,
    inline: Vec<String>,
    file: Option<PathBuf>,
    modified: Mutex<Option<SystemTime>>,
}

impl List {
    pub(crate) fn load(config: &ListConfig) -> Result<List, PolicyError> {
        if config.items.is_empty() && config.file.is_none() {
            return Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!(
                    "list {:?} has neither `items` nor `file`: it would match nothing",
                    config.name
                ),
            ));
        }
        let list = List {
            name: config.name.clone(),
            kind: config.kind,
            data: ArcSwap::from_pointee(ListData::Str(StringList::default())),
            inline: config.items.clone(),
            file: config.file.clone(),
            modified: Mutex::new(None),
        };
        let (data, modified) = list.read()?;
        list.data.store(Arc::new(data));
        *list.modified.lock().unwrap_or_else(|e| e.into_inner()) = modified;
        Ok(list)
    }

    fn read(&self) -> Result<(ListData, Option<SystemTime>), PolicyError> {
        let inline_source = format!("list {:?} items", self.name);
        let mut text = self.inline.join("\n");
        let mut modified = None;
        let mut source = inline_source;
        if let Some(path) = &self.file {
            let io = |e: std::io::Error| {
                PolicyError::new(
                    PolicyErrorKind::Io,
                    format!("list {:?}: cannot read {}: {e}", self.name, path.display()),
                )
            };
            modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            let file_text = std::fs::read_to_string(path).map_err(io)?;
            if text.is_empty() {
                text = file_text;
                source = path.display().to_string();
            } else {
                // Inline items are checked on their own, so errors point at the right place.
                if self.kind == ListKind::Ip {
                    IpList::parse(&source, &text)?;
                    IpList::parse(&path.display().to_string(), &file_text)?;
                }
                text.push('\n');
                text.push_str(&file_text);
            }
        }
        let data = match self.kind {
            ListKind::Ip => ListData::Ip(IpList::parse(&source, &text)?),
            ListKind::String => ListData::Str(StringList::parse(&text)),
        };
        Ok((data, modified))
    }

    /// Re-reads the file if its modification time changed; whether it was swapped.
    pub(crate) fn reload(&self) -> Result<bool, PolicyError> {
        let Some(path) = &self.file else {
            return Ok(false);
        };
        let now = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        {
            let seen = self.modified.lock().unwrap_or_else(|e| e.into_inner());
            if *seen == now && now.is_some() {
                return Ok(false);
            }
        }
        let (data, modified) = self.read()?;
        self.data.store(Arc::new(data));
        *self.modified.lock().unwrap_or_else(|e| e.into_inner()) = modified;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidrs_and_addresses_match_v4_and_v6() {
        let l = IpList::parse("t", "10.0.0.0/8\n192.0.2.7\n2001:db8::/32 # docs\n\n").unwrap();
        for yes in [
            "10.0.0.0",
            "10.255.255.255",
            "192.0.2.7",
            "2001:db8::1",
            "::ffff:10.1.2.3",
        ] {
            assert!(l.contains(ip(yes)), "{yes}");
        }
        for no in [
            "9.255.255.255",
            "11.0.0.0",
            "192.0.2.8",
            "2001:db9::",
            "::10.1.2.3",
        ] {
            assert!(!l.contains(ip(no)), "{no}");
        }
    }

    #[test]
    fn overlapping_and_adjacent_ranges_merge() {
        let l = IpList::parse("t", "10.0.0.0/25\n10.0.0.128/25\n10.0.0.5\n10.0.1.0/24").unwrap();
        assert_eq!(l.ranges(), 1);
        assert!(l.contains(ip("10.0.1.255")));
        assert!(!l.contains(ip("10.0.2.0")));
        let all = IpList::parse("t", "0.0.0.0/0\n255.255.255.255").unwrap();
        assert!(all.contains(ip("255.255.255.255")));
    }

    #[test]
    fn a_bad_entry_names_its_line_and_column() {
        let e = IpList::parse("office.txt", "10.0.0.0/8\n  10.0.0.300\n").unwrap_err();
        let loc = e.location().unwrap();
        assert_eq!((loc.line, loc.column), (2, 3));
        assert!(e.to_string().starts_with("office.txt:2:3: "), "{e}");
        assert!(e.to_string().contains("^^^"));
    }

    #[test]
    fn agrees_with_a_linear_scan() {
        // Pseudo-random CIDRs against a naive check.
        let mut x: u32 = 12345;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let nets: Vec<ipnet::Ipv4Net> = (0..500)
            .map(|_| {
                let len = (next() % 17 + 8) as u8;
                ipnet::Ipv4Net::new(next().into(), len).unwrap().trunc()
            })
            .collect();
        let list = IpList::from_nets(nets.iter().map(|n| IpNet::V4(*n)));
        for _ in 0..20_000 {
            let a = std::net::Ipv4Addr::from(next());
            let naive = nets.iter().any(|n| n.contains(&a));
            assert_eq!(list.contains(IpAddr::V4(a)), naive, "{a}");
        }
    }

    #[test]
    fn string_lists() {
        let l = StringList::parse("curl\n# c\n  sqlmap  \n");
        assert!(l.contains(b"sqlmap"));
        assert!(!l.contains(b"# c"));
        assert_eq!(l.len(), 2);
    }
}
