//! The connection, the request line and its parts, the server and the clock.

use super::{Emit, TxData, VarName, Visit};
use crate::variables::Variable;

impl TxData {
    /// [`TxData::visit`] for this family.
    pub(super) fn visit_server(&self, e: Emit<'_>, f: &mut Visit<'_>) {
        use Variable as V;
        let Emit { variable, .. } = e;
        match variable {
            V::Geo => {}
            V::RemoteAddr => e.single(&self.remote_addr, f),
            V::RemotePort => e.single(&self.remote_port, f),
            V::RemoteHost => e.single(&self.remote_addr, f),
            V::RemoteUser | V::AuthType => {}
            V::ServerAddr => e.single(&self.server_addr, f),
            V::ServerPort => e.single(&self.server_port, f),
            V::ServerName => {
                let host = self
                    .request_headers
                    .iter()
                    .find(|p| p.key.eq_ignore_ascii_case(b"host"))
                    .map(|p| p.value.as_slice())
                    .unwrap_or(&[]);
                let host = match host.iter().rposition(|&b| b == b':') {
                    Some(i) if !host.contains(&b']') || host[i - 1] == b']' => &host[..i],
                    _ => host,
                };
                e.single(host, f)
            }
            V::UniqueId => e.single(&self.unique_id, f),
            V::RequestMethod => e.single(&self.method, f),
            V::RequestProtocol => e.single(&self.protocol, f),
            V::RequestUriRaw => e.single(&self.uri_raw, f),
            V::RequestUri => e.single(&self.uri, f),
            V::RequestFilename | V::PathInfo => e.single(&self.filename, f),
            V::RequestBasename => e.single(&self.basename, f),
            V::QueryString => e.single(&self.query_string, f),
            V::RequestLine => e.single(&self.request_line, f),
            V::ModsecBuild => e.single(b"030009000", f),
            V::WebAppId => e.single(&self.web_app_id, f),
            V::SessionId | V::UserId => {}
            V::Time
            | V::TimeDay
            | V::TimeEpoch
            | V::TimeHour
            | V::TimeMin
            | V::TimeMon
            | V::TimeSec
            | V::TimeWday
            | V::TimeYear => {
                let t = crate::eval::time::Civil::from_epoch(self.epoch_secs);
                match variable {
                    V::TimeEpoch => e.number(i128::from(self.epoch_secs), f),
                    V::TimeYear => e.number(i128::from(t.year), f),
                    V::TimeMon => e.number(i128::from(t.month), f),
                    V::TimeDay => e.number(i128::from(t.day), f),
                    V::TimeHour => e.number(i128::from(t.hour), f),
                    V::TimeMin => e.number(i128::from(t.minute), f),
                    V::TimeSec => e.number(i128::from(t.second), f),
                    V::TimeWday => e.number(i128::from(t.weekday), f),
                    _ => {
                        let s = format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second);
                        f(
                            None,
                            VarName {
                                variable,
                                key: None,
                            },
                            s.as_bytes(),
                        )
                    }
                }
            }
            _ => {}
        }
    }
}
