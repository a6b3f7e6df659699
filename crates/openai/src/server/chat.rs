//! Chat messages to prompt text, in the shape of the model's own chat template.
//!
//! A GGUF carries its template as Jinja (`tokenizer.chat_template`). We do not run Jinja:
//! we recognise the template families our models use by their markers and render their
//! shape (turn markers, roles, the generation prompt). Default system prompts a template
//! may add are not added. A GGUF without a template gets the family whose turn markers are
//! in its vocabulary. Any other template is refused with a clear message.

/// One message of a chat request.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// A chat template family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatTemplate {
    /// `<start_of_turn>user ... <end_of_turn>`, the assistant as `model`, system text in the
    /// first user turn (Gemma).
    Gemma,
    /// `<|im_start|>role ... <|im_end|>` (Qwen, SmolLM).
    ChatMl,
    /// `<|start_header_id|>role<|end_header_id|>` (Llama 3).
    Llama3,
}

impl ChatTemplate {
    /// The family of a GGUF's Jinja template, if it is one we render.
    pub fn recognise(jinja: &str) -> Option<ChatTemplate> {
        if jinja.contains("<start_of_turn>") {
            Some(ChatTemplate::Gemma)
        } else if jinja.contains("<|im_start|>") {
            Some(ChatTemplate::ChatMl)
        } else if jinja.contains("<|start_header_id|>") {
            Some(ChatTemplate::Llama3)
        } else {
            None
        }
    }

    /// For a GGUF without a template: the family whose turn markers its vocabulary has.
    pub fn from_vocabulary(has_token: impl Fn(&str) -> bool) -> Option<ChatTemplate> {
        [("<start_of_turn>", ChatTemplate::Gemma), ("<|im_start|>", ChatTemplate::ChatMl), ("<|start_header_id|>", ChatTemplate::Llama3)]
            .into_iter()
            .find(|(marker, _)| has_token(marker))
            .map(|(_, t)| t)
    }

    /// The prompt text for `messages`, ending where the assistant's answer begins. BOS is
    /// not part of it (the tokenizer adds it).
    pub fn render(self, messages: &[Message]) -> String {
        let mut out = String::new();
        match self {
            ChatTemplate::Gemma => {
                let system: Vec<&str> = messages.iter().filter(|m| m.role == "system").map(|m| m.content.as_str()).collect();
                let mut system = (!system.is_empty()).then(|| system.join("\n\n"));
                for m in messages.iter().filter(|m| m.role != "system") {
                    let role = if m.role == "assistant" { "model" } else { "user" };
                    out += &format!("<start_of_turn>{role}\n");
                    if role == "user" {
                        if let Some(s) = system.take() {
                            out += &format!("{s}\n\n");
                        }
                    }
                    out += &format!("{}<end_of_turn>\n", m.content.trim());
                }
                out += "<start_of_turn>model\n";
            }
            ChatTemplate::ChatMl => {
                for m in messages {
                    out += &format!("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
                }
                out += "<|im_start|>assistant\n";
            }
            ChatTemplate::Llama3 => {
                for m in messages {
                    out += &format!("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", m.role, m.content.trim());
                }
                out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: &str, content: &str) -> Message {
        Message { role: role.into(), content: content.into() }
    }

    #[test]
    fn templates_are_recognised_by_their_markers() {
        assert_eq!(ChatTemplate::recognise("{{ '<start_of_turn>' + role }}"), Some(ChatTemplate::Gemma));
        assert_eq!(ChatTemplate::recognise("{{'<|im_start|>' + message['role']}}"), Some(ChatTemplate::ChatMl));
        assert_eq!(ChatTemplate::recognise("<|start_header_id|>"), Some(ChatTemplate::Llama3));
        assert_eq!(ChatTemplate::recognise("[INST] {{ content }} [/INST]"), None);
        assert_eq!(ChatTemplate::from_vocabulary(|t| t == "<|im_start|>"), Some(ChatTemplate::ChatMl));
        assert_eq!(ChatTemplate::from_vocabulary(|_| false), None);
    }

    #[test]
    fn gemma_puts_the_system_text_in_the_first_user_turn() {
        let text = ChatTemplate::Gemma.render(&[m("system", "Be brief."), m("user", "Hi"), m("assistant", "Hello!"), m("user", "Why?")]);
        assert_eq!(
            text,
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn chatml_and_llama3_end_with_the_assistant_prompt() {
        assert_eq!(ChatTemplate::ChatMl.render(&[m("user", "Hi")]), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
        assert_eq!(
            ChatTemplate::Llama3.render(&[m("user", "Hi")]),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        );
    }
}
