//! Reusing a finished transaction's [`TxData`] for the next one (see `eval::pool`).
//!
//! A transaction copies the request line, the headers, the arguments and the response
//! head into `TxData`: a few dozen small buffers, one allocation each, request after
//! request. A finished transaction's `TxData` is emptied instead and handed to the next
//! one, which writes into the same buffers. Emptying starts from `TxData::default()` and
//! moves back only the cleared containers, naming every field (so a field added later
//! cannot keep a value by oversight); the pairs of the header and argument lists become
//! spare pairs that [`TxData::pair`] fills again.

use super::{Pair, TxData};

/// A buffer whose capacity grew beyond this is dropped rather than kept (one big request
/// must not make every pooled transaction big).
const KEEP_BYTES: usize = 16 * 1024;

/// At most this many spare pairs are kept.
const SPARE_PAIRS: usize = 1024;

/// A pair list at least this long that becomes the spare pairs is not grown to take the
/// other lists' pairs.
const LONG_LIST: usize = 64;

/// A pair whose buffers together hold more than this is not kept as a spare.
const KEEP_PAIR_BYTES: usize = 1024;

/// Empties `pair`; true when its buffers are small enough to keep as a spare.
fn emptied_to_keep(pair: &mut Pair) -> bool {
    pair.key.clear();
    pair.value.clear();
    pair.key.capacity() + pair.value.capacity() <= KEEP_PAIR_BYTES
}

/// `buf`, emptied, when it is small enough to keep; else a new empty buffer.
fn cleared<T>(mut buf: Vec<T>) -> Vec<T> {
    if buf.capacity() * std::mem::size_of::<T>().max(1) > KEEP_BYTES {
        return Vec::new();
    }
    buf.clear();
    buf
}

impl TxData {
    /// Empties every field for another transaction of the same program, keeping the
    /// small buffers (never their contents) and the `TX` table (cleared by
    /// [`super::super::vars::TxVars::clear`]). Afterwards `self` reads like
    /// `TxData::default()`.
    pub(crate) fn clear_for_reuse(&mut self) {
        let TxData {
            remote_addr,
            remote_port,
            server_addr,
            server_port,
            unique_id,
            epoch_secs: _,
            method,
            protocol,
            uri_raw,
            uri,
            filename,
            basename,
            query_string,
            request_line,
            request_headers,
            cookies,
            args_get,
            args_post,
            urlencoded_error: _,
            request_body,
            request_body_visible: _,
            request_body_length: _,
            body_processor: _,
            reqbody_error: _,
            reqbody_error_msg: _,
            files: _,
            part_headers,
            multipart_names: _,
            multipart_filenames: _,
            multipart: _,
            xml_text: _,
            xml_attrs: _,
            response_status,
            response_protocol,
            response_headers,
            response_body,
            response_content_type,
            response_content_length,
            outbound_data_error: _,
            inbound_data_error: _,
            match_limit_exceeded: _,
            mut tx,
            collections: _,
            env: _,
            last_match: _,
            last_buf,
            matched_vars,
            matched_buf,
            highest_severity: _,
            rule_id: _,
            duration_micros: _,
            phase: _,
            web_app_id,
            mut spare_pairs,
        } = std::mem::take(self);
        let mut lists = [
            request_headers,
            cookies,
            args_get,
            args_post,
            part_headers,
            response_headers,
        ];
        // With no spare pairs yet, the longest list becomes the spares as it is: moving
        // its pairs one by one would grow a second vector beside it (on a 10 KB JSON body
        // that was the transaction's peak). A long list that became the spares is not
        // grown for the other lists' few pairs either: `room` is what the spares take.
        let mut room = SPARE_PAIRS;
        if spare_pairs.is_empty() {
            if let Some(longest) = lists.iter_mut().max_by_key(|l| l.len()) {
                if longest.len() > spare_pairs.capacity() {
                    if longest.len() >= LONG_LIST {
                        room = room.min(longest.capacity());
                    }
                    std::mem::swap(&mut spare_pairs, longest);
                    spare_pairs.truncate(SPARE_PAIRS);
                    spare_pairs.retain_mut(emptied_to_keep);
                }
            }
        }
        if spare_pairs.capacity() > 2 * SPARE_PAIRS {
            spare_pairs.shrink_to(SPARE_PAIRS);
        }
        for list in &mut lists {
            for mut pair in list.drain(..) {
                if spare_pairs.len() >= room {
                    break;
                }
                if emptied_to_keep(&mut pair) {
                    spare_pairs.push(pair);
                }
            }
        }
        let [request_headers, cookies, args_get, args_post, part_headers, response_headers] = lists;
        tx.clear();
        *self = TxData {
            remote_addr: cleared(remote_addr),
            remote_port: cleared(remote_port),
            server_addr: cleared(server_addr),
            server_port: cleared(server_port),
            unique_id: cleared(unique_id),
            method: cleared(method),
            protocol: cleared(protocol),
            uri_raw: cleared(uri_raw),
            uri: cleared(uri),
            filename: cleared(filename),
            basename: cleared(basename),
            query_string: cleared(query_string),
            request_line: cleared(request_line),
            request_headers: cleared(request_headers),
            cookies: cleared(cookies),
            args_get: cleared(args_get),
            args_post: cleared(args_post),
            part_headers: cleared(part_headers),
            response_headers: cleared(response_headers),
            request_body: cleared(request_body),
            response_body: cleared(response_body),
            response_status: cleared(response_status),
            response_protocol: cleared(response_protocol),
            response_content_type: cleared(response_content_type),
            response_content_length: cleared(response_content_length),
            tx,
            last_buf: cleared(last_buf),
            matched_vars: cleared(matched_vars),
            matched_buf: cleared(matched_buf),
            web_app_id: cleared(web_app_id),
            spare_pairs,
            ..TxData::default()
        };
    }

    /// Replaces the pair list that `field` chooses with the pairs `fill` hands to the
    /// function it is given (a parser's callback), refilling spare pairs; returns what
    /// `fill` returns.
    pub(crate) fn fill_pairs<R>(
        &mut self,
        field: fn(&mut TxData) -> &mut Vec<Pair>,
        fill: impl FnOnce(&mut dyn FnMut(&[u8], &[u8])) -> R,
    ) -> R {
        let mut list = std::mem::take(field(self));
        list.clear();
        let out = fill(&mut |k, v| list.push(self.pair(k, v)));
        *field(self) = list;
        out
    }

    /// [`TxData::fill_pairs`] with the pairs of `items`.
    pub(crate) fn set_pairs<'a>(
        &mut self,
        field: fn(&mut TxData) -> &mut Vec<Pair>,
        items: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) {
        self.fill_pairs(field, |push| {
            for (k, v) in items {
                push(k, v);
            }
        });
    }

    /// A pair holding `key` and `value`: a spare one refilled when there is one.
    pub(crate) fn pair(&mut self, key: &[u8], value: &[u8]) -> Pair {
        match self.spare_pairs.pop() {
            Some(mut p) => {
                p.key.extend_from_slice(key);
                p.value.extend_from_slice(value);
                p
            }
            None => Pair::new(key, value),
        }
    }
}

/// Replaces the contents of `buf` with `bytes`, in place.
pub(crate) fn refill(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.clear();
    buf.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An emptied `TxData` reads like a new one: its debug form (every field's contents,
    /// not capacities) is the default's, but for the spare pairs, which are empty.
    #[test]
    fn cleared_data_reads_like_new() {
        let mut d = TxData::default();
        crate::eval::request::set_request_line(&mut d, b"GET", b"/a?b=c", b"HTTP/1.1");
        for (k, v) in [(&b"Host"[..], &b"x"[..]), (b"Cookie", b"a=b")] {
            let p = d.pair(k, v);
            d.request_headers.push(p);
        }
        let p = d.pair(b"b", b"c");
        d.args_get.push(p);
        d.tx.set(b"anomaly_score", b"5");
        d.matched_buf.extend_from_slice(b"Ax");
        d.note_match(0, 1);
        d.start_rule();
        d.response_status.extend_from_slice(b"200");
        d.request_body.extend_from_slice(b"body");
        d.phase = 2;
        d.clear_for_reuse();
        assert_eq!(d.spare_pairs.len(), 3);
        assert!(d
            .spare_pairs
            .iter()
            .all(|p| p.key.is_empty() && p.value.is_empty()));
        assert_eq!(d.tx.get(b"anomaly_score"), None);
        let (spare, tx) = (
            std::mem::take(&mut d.spare_pairs),
            std::mem::take(&mut d.tx),
        );
        assert_eq!(format!("{d:?}"), format!("{:?}", TxData::default()));
        (d.spare_pairs, d.tx) = (spare, tx);
        let p = d.pair(b"k", b"v");
        assert_eq!((&p.key[..], &p.value[..]), (&b"k"[..], &b"v"[..]));
    }

    /// The longest list becomes the spare pairs in place, bounded and emptied, without its
    /// oversized pairs.
    #[test]
    fn a_long_list_becomes_the_spares() {
        let mut d = TxData::default();
        d.request_headers.push(Pair::new("Host", "h"));
        d.args_post.push(Pair::new(vec![b'k'; 2000], b"v".to_vec()));
        for i in 0..2 * SPARE_PAIRS {
            d.args_post.push(Pair::new(i.to_string(), b"v".to_vec()));
        }
        d.clear_for_reuse();
        // The list's own vector, not one grown beside it, shrunk to the bound; the header
        // pair joined it.
        assert_eq!(d.spare_pairs.len(), SPARE_PAIRS);
        assert_eq!(d.spare_pairs.capacity(), SPARE_PAIRS);
        // A long list full to its capacity is not grown for a header's pair.
        let mut d = TxData::default();
        d.request_headers.push(Pair::new("Host", "h"));
        d.args_post = (0..LONG_LIST)
            .map(|i| Pair::new(i.to_string(), "v"))
            .collect();
        d.args_post.shrink_to_fit();
        d.clear_for_reuse();
        assert_eq!(d.spare_pairs.len(), LONG_LIST);
        assert_eq!(d.spare_pairs.capacity(), LONG_LIST);
        let mut d = TxData {
            args_post: (0..10).map(|i| Pair::new(i.to_string(), "v")).collect(),
            ..TxData::default()
        };
        let ptr = d.args_post.as_ptr();
        d.clear_for_reuse();
        assert_eq!(d.spare_pairs.as_ptr(), ptr);
        assert!(d
            .spare_pairs
            .iter()
            .all(|p| p.key.is_empty() && p.value.is_empty() && p.key.capacity() < 2000));
        assert!(d.args_post.is_empty());
    }
}
