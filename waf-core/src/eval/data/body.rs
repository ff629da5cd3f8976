//! The request body as a whole (`REQUEST_BODY`, `XML`, body-processor results, lengths) and the response line, headers-derived values and body.

use super::{key_of, Emit, Source, TxData, VarName, Visit};
use crate::variables::{Selector, Variable};

impl TxData {
    /// [`TxData::visit`] for this family.
    pub(super) fn visit_body(&self, e: Emit<'_>, f: &mut Visit<'_>) {
        use Variable as V;
        let Emit {
            variable, selector, ..
        } = e;
        match variable {
            V::Xml if matches!(selector, Selector::XPath(_)) => {
                let Selector::XPath(xpath) = selector else {
                    return;
                };
                if self.body_processor != Some(crate::actions::ctl::BodyProcessor::Xml)
                    || self.reqbody_error
                {
                    return;
                }
                let name = VarName {
                    variable,
                    key: Some(xpath.text().as_bytes()),
                };
                // Values are computed, not stored: no cache key.
                xpath.evaluate(&self.request_body, &mut |v| f(None, name, v));
            }
            V::Xml => {
                let attrs = matches!(selector, Selector::Key(k) if k == b"//@*");
                let items = if attrs {
                    &self.xml_attrs
                } else {
                    &self.xml_text
                };
                let src = if attrs {
                    Source::XmlAttr
                } else {
                    Source::XmlText
                };
                for (i, v) in items.iter().enumerate() {
                    f(
                        key_of(src, i),
                        VarName {
                            variable,
                            key: Some(if attrs { b"//@*" } else { b"/*" }),
                        },
                        v,
                    );
                }
            }
            V::RequestBody if self.request_body_visible => e.single(&self.request_body, f),
            V::RequestBodyLength => e.number(self.request_body_length as i128, f),
            V::FullRequestLength => {
                let n = self.request_line.len()
                    + self
                        .request_headers
                        .iter()
                        .map(|p| p.key.len() + p.value.len() + 4)
                        .sum::<usize>()
                    + self.request_body_length;
                e.number(n as i128, f)
            }
            V::FullRequest => {}
            V::ReqbodyProcessor => e.single(
                self.body_processor
                    .map_or(&b""[..], |p| p.name().as_bytes()),
                f,
            ),
            V::ReqbodyError => e.flag(self.reqbody_error, f),
            V::ReqbodyErrorMsg => e.single(&self.reqbody_error_msg, f),
            V::ReqbodyProcessorError => e.flag(self.reqbody_error, f),
            V::ReqbodyProcessorErrorMsg => e.single(&self.reqbody_error_msg, f),
            V::UrlencodedError => e.flag(self.urlencoded_error, f),
            V::InboundDataError => e.flag(self.inbound_data_error, f),
            V::OutboundDataError => e.flag(self.outbound_data_error, f),
            V::ResponseBody => e.single(&self.response_body, f),
            V::ResponseContentLength => e.single(&self.response_content_length, f),
            V::ResponseContentType => e.single(&self.response_content_type, f),
            V::ResponseProtocol => e.single(&self.response_protocol, f),
            V::ResponseStatus => e.single(&self.response_status, f),
            V::StatusLine => {
                let mut line = self.response_protocol.clone();
                line.push(b' ');
                line.extend_from_slice(&self.response_status);
                f(
                    None,
                    VarName {
                        variable,
                        key: None,
                    },
                    &line,
                )
            }
            _ => {}
        }
    }
}
