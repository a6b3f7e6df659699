//! One streamed chunk of `/v1/completions` or `/v1/chat/completions`, as far as timing needs
//! it: the text it adds, how the choice finished, the usage a server reports, or an error.

use serde_json::Value;

/// Which endpoint a target streams from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/completions`: the prompt is sent as is.
    Completions,
    /// `/v1/chat/completions`: the prompt is one user message, which the server wraps in the
    /// model's chat template (so it counts more prompt tokens than we sent).
    Chat,
}

impl Api {
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "completions",
            Api::Chat => "chat/completions",
        }
    }
}

impl std::str::FromStr for Api {
    type Err = String;
    fn from_str(s: &str) -> Result<Api, String> {
        match s {
            "completions" => Ok(Api::Completions),
            "chat" => Ok(Api::Chat),
            other => Err(format!("'{other}': expected completions or chat")),
        }
    }
}

/// Token counts a server reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// What one event's data says.
#[derive(Debug, Default, PartialEq)]
pub struct Chunk {
    /// Generated text (reasoning text included: it is output the server decoded too).
    pub text: String,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    /// An error the server reported inside the stream.
    pub error: Option<String>,
}

impl Chunk {
    /// Read one event's data; an event that is not such a chunk is an error that quotes it.
    pub fn parse(data: &str, api: Api) -> Result<Chunk, String> {
        let quote = || {
            let mut q: String = data.chars().take(120).collect();
            if q.len() < data.len() {
                q.push('…');
            }
            q
        };
        let v: Value = serde_json::from_str(data).map_err(|e| format!("malformed event from the server ({e}): {}", quote()))?;
        if let Some(e) = v.get("error") {
            let message = e.get("message").and_then(Value::as_str).map(String::from).unwrap_or_else(|| e.to_string());
            return Ok(Chunk { error: Some(message), ..Default::default() });
        }
        let usage = v.get("usage").filter(|u| !u.is_null()).map(|u| {
            let n = |k: &str| u.get(k).and_then(Value::as_u64);
            match (n("prompt_tokens"), n("completion_tokens")) {
                (Some(prompt_tokens), Some(completion_tokens)) => Ok(Usage { prompt_tokens, completion_tokens }),
                _ => Err(format!("malformed usage from the server: {}", quote())),
            }
        });
        let choices = match v.get("choices") {
            Some(Value::Array(c)) => c.as_slice(),
            None | Some(Value::Null) if usage.is_some() => &[],
            _ => return Err(format!("malformed event from the server (no choices): {}", quote())),
        };
        let mut chunk = Chunk { usage: usage.transpose()?, ..Default::default() };
        for c in choices {
            let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();
            match api {
                Api::Completions => chunk.text += &text(c.get("text")),
                Api::Chat => {
                    let delta = c.get("delta");
                    chunk.text += &text(delta.and_then(|d| d.get("reasoning_content")));
                    chunk.text += &text(delta.and_then(|d| d.get("content")));
                }
            }
            if let Some(r) = c.get("finish_reason").and_then(Value::as_str) {
                chunk.finish_reason = Some(r.to_string());
            }
        }
        Ok(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_and_chat_chunks_give_their_text() {
        let c = Chunk::parse(r#"{"choices":[{"index":0,"text":" Paris","finish_reason":null}]}"#, Api::Completions).unwrap();
        assert_eq!((c.text.as_str(), c.finish_reason), (" Paris", None));
        let c = Chunk::parse(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":"length"}]}"#, Api::Chat).unwrap();
        assert_eq!((c.text.as_str(), c.finish_reason.as_deref()), ("Hi", Some("length")));
    }

    #[test]
    fn a_usage_only_chunk_has_no_choices() {
        let c = Chunk::parse(r#"{"choices":[],"usage":{"prompt_tokens":64,"completion_tokens":16,"total_tokens":80}}"#, Api::Chat).unwrap();
        assert_eq!(c.usage, Some(Usage { prompt_tokens: 64, completion_tokens: 16 }));
        let c = Chunk::parse(r#"{"usage":{"prompt_tokens":1,"completion_tokens":2}}"#, Api::Completions).unwrap();
        assert_eq!(c.usage.map(|u| u.completion_tokens), Some(2));
    }

    #[test]
    fn errors_and_garbage_are_told_apart() {
        let c = Chunk::parse(r#"{"error":{"message":"context overflow","code":400}}"#, Api::Completions).unwrap();
        assert_eq!(c.error.as_deref(), Some("context overflow"));
        for bad in ["{not json", r#"{"id":"x"}"#, r#"{"choices":[],"usage":{"prompt_tokens":"x"}}"#, "[1,2]"] {
            let e = Chunk::parse(bad, Api::Completions).unwrap_err();
            assert!(e.starts_with("malformed"), "{bad}: {e}");
        }
    }
}
