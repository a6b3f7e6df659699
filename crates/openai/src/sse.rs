//! Server-Sent Events, as OpenAI-compatible servers stream them: `data:` lines, an event
//! ending at a blank line. Bytes arrive in network-sized pieces that may split a line (or a
//! UTF-8 character) anywhere, so the parser keeps what is not yet a whole line.

/// Turns received bytes into the data of each complete event.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<String>,
}

impl SseParser {
    /// Feed received bytes; returns the data of every event they completed, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &b in bytes {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = String::from_utf8_lossy(&self.line).into_owned();
            self.line.clear();
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(std::mem::take(&mut self.data).join("\n"));
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                self.data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
            }
            // Comments (`: keep-alive`), `event:`, `id:` and `retry:` carry nothing we use.
        }
        events
    }

    /// The stream ended: an event whose closing blank line never came, if any.
    pub fn finish(&mut self) -> Option<String> {
        if !self.line.is_empty() {
            self.push(b"\n");
        }
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data).join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let stream = b"data: {\"a\":1}\n\n: keep-alive\n\ndata:{\"b\":\"\xc3\xa9\"}\r\n\r\nevent: x\ndata: one\ndata: two\n\ndata: [DONE]\n\n";
        for cut in 0..stream.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&stream[..cut]);
            got.extend(p.push(&stream[cut..]));
            assert_eq!(got, ["{\"a\":1}", "{\"b\":\"é\"}", "one\ntwo", "[DONE]"], "cut at {cut}");
            assert_eq!(p.finish(), None);
        }
    }

    #[test]
    fn an_unterminated_last_event_is_handed_over_at_the_end() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: {\"x\":1}").is_empty());
        assert_eq!(p.finish().as_deref(), Some("{\"x\":1}"));
    }
}
