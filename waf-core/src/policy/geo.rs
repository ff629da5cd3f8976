//! IP intelligence, part 1: country and autonomous system from MaxMind-format `.mmdb`
//! files (`ip.src.country`, `ip.src.asnum`).
//!
//! Databases are read whole into memory with the `maxminddb` crate at load and on
//! [`super::Policy::reload`] when a file's modification time changes; the new reader is
//! swapped in atomically, so a lookup never waits for a reload. A database that fails to
//! open at load is an error; one that fails on reload keeps the old reader (and the error
//! is returned to the host to log). Country databases are read at `country.iso_code`
//! (GeoIP2/GeoLite2 Country and City layout), ASN databases at
//! `autonomous_system_number` (GeoLite2 ASN layout). Lookups only happen for requests whose
//! rules reach a country or ASN condition.
//!
//! Built without the `geoip` feature, a `[geo]` section is a load error rather than a
//! silently empty field.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::error::{PolicyError, PolicyErrorKind};

/// `[geo]`: where the databases are.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GeoConfig {
    /// A country (or city) database: fills `ip.src.country` (ISO 3166 code, e.g. `"DE"`).
    #[serde(default)]
    pub country_db: Option<PathBuf>,
    /// An ASN database: fills `ip.src.asnum`.
    #[serde(default)]
    pub asn_db: Option<PathBuf>,
}

/// The loaded databases.
#[derive(Debug, Default)]
pub(crate) struct Geo {
    country: Option<imp::Db>,
    asn: Option<imp::Db>,
}

impl Geo {
    pub(crate) fn load(config: &GeoConfig) -> Result<Geo, PolicyError> {
        if config.country_db.is_none() && config.asn_db.is_none() {
            return Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                "[geo] names neither `country_db` nor `asn_db`",
            ));
        }
        Ok(Geo {
            country: config.country_db.clone().map(imp::Db::open).transpose()?,
            asn: config.asn_db.clone().map(imp::Db::open).transpose()?,
        })
    }

    pub(crate) fn country(&self, ip: IpAddr) -> Option<Vec<u8>> {
        self.country.as_ref()?.country(ip)
    }

    pub(crate) fn asn(&self, ip: IpAddr) -> Option<u32> {
        self.asn.as_ref()?.asn(ip)
    }

    /// Re-reads changed databases; how many were swapped.
    pub(crate) fn reload(&self) -> Result<usize, PolicyError> {
        let mut n = 0;
        for db in [&self.country, &self.asn].into_iter().flatten() {
            n += usize::from(db.reload()?);
        }
        Ok(n)
    }
}

#[cfg(feature = "geoip")]
mod imp {
    use std::net::IpAddr;
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};
    use std::time::SystemTime;

    use arc_swap::ArcSwap;
    use maxminddb::Reader;
    use serde::Deserialize;

    use super::super::error::{PolicyError, PolicyErrorKind};

    #[derive(Debug)]
    pub(super) struct Db {
        path: PathBuf,
        reader: ArcSwap<Reader<Vec<u8>>>,
        modified: Mutex<Option<SystemTime>>,
    }

    #[derive(Deserialize)]
    struct CountryRecord<'a> {
        #[serde(borrow)]
        country: Option<Iso<'a>>,
    }

    #[derive(Deserialize)]
    struct Iso<'a> {
        iso_code: Option<&'a str>,
    }

    #[derive(Deserialize)]
    struct AsnRecord {
        autonomous_system_number: Option<u32>,
    }

    fn read(path: &PathBuf) -> Result<(Reader<Vec<u8>>, Option<SystemTime>), PolicyError> {
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        let reader = Reader::open_readfile(path).map_err(|e| {
            PolicyError::new(
                PolicyErrorKind::Io,
                format!("cannot open geo database {}: {e}", path.display()),
            )
        })?;
        Ok((reader, modified))
    }

    impl Db {
        pub(super) fn open(path: PathBuf) -> Result<Db, PolicyError> {
            let (reader, modified) = read(&path)?;
            Ok(Db {
                path,
                reader: ArcSwap::from_pointee(reader),
                modified: Mutex::new(modified),
            })
        }

        pub(super) fn country(&self, ip: IpAddr) -> Option<Vec<u8>> {
            let reader = self.reader.load();
            let found = reader.lookup(ip).ok()?;
            let rec: CountryRecord<'_> = found.decode().ok()??;
            Some(rec.country?.iso_code?.as_bytes().to_vec())
        }

        pub(super) fn asn(&self, ip: IpAddr) -> Option<u32> {
            let reader = self.reader.load();
            let found = reader.lookup(ip).ok()?;
            let rec: AsnRecord = found.decode().ok()??;
            rec.autonomous_system_number
        }

        pub(super) fn reload(&self) -> Result<bool, PolicyError> {
            let now = std::fs::metadata(&self.path)
                .and_then(|m| m.modified())
                .ok();
            if now.is_some() && *self.modified.lock().unwrap_or_else(|e| e.into_inner()) == now {
                return Ok(false);
            }
            let (reader, modified) = read(&self.path)?;
            self.reader.store(Arc::new(reader));
            *self.modified.lock().unwrap_or_else(|e| e.into_inner()) = modified;
            Ok(true)
        }
    }
}

#[cfg(not(feature = "geoip"))]
mod imp {
    use std::net::IpAddr;
    use std::path::PathBuf;

    use super::super::error::{PolicyError, PolicyErrorKind};

    #[derive(Debug)]
    pub(super) enum Db {}

    impl Db {
        pub(super) fn open(path: PathBuf) -> Result<Db, PolicyError> {
            Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!(
                    "geo database {}: waf-core was built without the `geoip` feature",
                    path.display()
                ),
            ))
        }
        pub(super) fn country(&self, _: IpAddr) -> Option<Vec<u8>> {
            match *self {}
        }
        pub(super) fn asn(&self, _: IpAddr) -> Option<u32> {
            match *self {}
        }
        pub(super) fn reload(&self) -> Result<bool, PolicyError> {
            match *self {}
        }
    }
}
