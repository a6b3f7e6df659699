//! A bench file is made to be shared: before one is written, every free text in it (an error
//! message, where settings came from) loses the user's name, the host's name and any path,
//! and [`leaks`] is how a test proves none is left.

use serde_json::Value;

/// What names this machine's owner: home directory, user name, host name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Private {
    pub home: Option<String>,
    pub user: Option<String>,
    pub host: Option<String>,
}

impl Private {
    pub fn of_this_machine() -> Private {
        let env = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let host = ["/proc/sys/kernel/hostname", "/etc/hostname"]
            .iter()
            .find_map(|f| std::fs::read_to_string(f).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
            .or_else(|| env("HOSTNAME").or_else(|| env("COMPUTERNAME")));
        Private {
            home: env("HOME").or_else(|| env("USERPROFILE")).filter(|h| h.len() > 1),
            user: env("USER").or_else(|| env("LOGNAME")).or_else(|| env("USERNAME")),
            // A generic name says nothing about who owns the machine.
            host: host.filter(|h| !matches!(h.as_str(), "localhost" | "localhost.localdomain")),
        }
    }

    /// The names to take out, with what stands in their place.
    fn names(&self) -> Vec<(&str, &'static str)> {
        let mut n = Vec::new();
        if let Some(h) = &self.host {
            n.push((h.as_str(), "(host)"));
        }
        if let Some(u) = self.user.as_deref().filter(|u| u.len() >= 2) {
            n.push((u, "(user)"));
        }
        n
    }
}

/// The system's own directories: a path there (`/proc/cpuinfo`, `/sys/class/powercap`) says
/// what the machine exposes, nothing of its owner's.
const SYSTEM_DIRS: [&str; 6] = ["/proc/", "/sys/", "/dev/", "/usr/", "/lib/", "/etc/"];

/// Whether `word` is an absolute path (`/home/x/m.gguf`, `C:\Users\x`) outside the
/// system's own directories.
fn is_path(word: &str) -> bool {
    let w = word.trim_matches(|c: char| matches!(c, '\'' | '"' | '(' | ')' | ',' | ':' | ';' | '`'));
    let unix = w.starts_with('/') && w[1..].contains('/') && !SYSTEM_DIRS.iter().any(|d| w.starts_with(d));
    let windows = w.len() > 3 && w.as_bytes()[1] == b':' && (w.as_bytes()[2] == b'\\' || w.as_bytes()[2] == b'/') && w.as_bytes()[0].is_ascii_alphabetic();
    unix || windows
}

/// `text` without the home directory, paths (each kept as its file name) and names.
pub fn scrub(text: &str, private: &Private) -> String {
    let mut t = text.to_string();
    if let Some(home) = &private.home {
        t = t.replace(home.as_str(), "~");
    }
    let mut out: Vec<String> = Vec::new();
    for word in t.split(' ') {
        if is_path(word) {
            let trimmed = word.trim_end_matches(|c: char| matches!(c, '\'' | '"' | ')' | ',' | ':' | ';' | '`'));
            let tail = &word[trimmed.len()..];
            let name = trimmed.rsplit(['/', '\\']).next().unwrap_or("");
            let head: String = trimmed.chars().take_while(|c| matches!(c, '\'' | '"' | '(' | '`')).collect();
            out.push(format!("{head}…/{name}{tail}"));
        } else {
            out.push(word.to_string());
        }
    }
    let mut t = out.join(" ");
    for (name, stand_in) in private.names() {
        t = replace_word(&t, name, stand_in);
    }
    t
}

/// `text` with `word` replaced wherever it stands alone (not inside a longer word).
fn replace_word(text: &str, word: &str, by: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(word) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + word.len()..].chars().next();
        let inside = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        out.push_str(&rest[..i]);
        out.push_str(if inside(before) || inside(after) { word } else { by });
        rest = &rest[i + word.len()..];
    }
    out.push_str(rest);
    out
}

/// Every string of `value`, scrubbed.
pub fn scrub_json(value: Value, private: &Private) -> Value {
    match value {
        Value::String(s) => Value::String(scrub(&s, private)),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| scrub_json(v, private)).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, scrub_json(v, private))).collect()),
        other => other,
    }
}

/// The strings of `value` that still say something private (a path, the home directory, the
/// user's or the host's name): empty for a file fit to share.
pub fn leaks(value: &Value, private: &Private) -> Vec<String> {
    let mut found = Vec::new();
    let mut visit = |s: &str| {
        let named = private.names().iter().any(|(n, _)| replace_word(s, n, "\u{0}") != s);
        let home = private.home.as_deref().is_some_and(|h| s.contains(h));
        if named || home || s.split(' ').any(is_path) {
            found.push(s.to_string());
        }
    };
    fn walk(v: &Value, f: &mut dyn FnMut(&str)) {
        match v {
            Value::String(s) => f(s),
            Value::Array(a) => a.iter().for_each(|v| walk(v, f)),
            Value::Object(o) => o.iter().for_each(|(k, v)| {
                f(k);
                walk(v, f)
            }),
            _ => {}
        }
    }
    walk(value, &mut visit);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn someone() -> Private {
        Private { home: Some("/home/ada".into()), user: Some("ada".into()), host: Some("ada-laptop".into()) }
    }

    #[test]
    fn paths_names_and_the_home_directory_are_taken_out() {
        let p = someone();
        let said = "cannot open /home/ada/models/m.gguf: settings from /opt/lx/profile.json on ada-laptop, by ada (adam's too)";
        let clean = scrub(said, &p);
        assert_eq!(clean, "cannot open ~/models/m.gguf: settings from …/profile.json on (host), by (user) (adam's too)");
        assert!(leaks(&Value::String(clean), &p).is_empty());
        assert_eq!(leaks(&Value::String(said.into()), &p), vec![said.to_string()]);
        assert_eq!(scrub("C:\\Users\\ada\\m.gguf failed", &Private::default()), "…/m.gguf failed");
    }

    #[test]
    fn figures_and_rates_are_not_paths() {
        let p = someone();
        for text in ["tok/s", "decode 72.1 tok/s at 1/4 of the ceiling", "CPU (AVX2, 2 threads): all 19 layers", "~/m.gguf", "CPU clock: /proc/cpuinfo (the kernel's figure)", "no powercap (/sys/class/powercap is absent)"] {
            assert_eq!(scrub(text, &p), text);
            assert!(leaks(&Value::String(text.into()), &p).is_empty(), "{text}");
        }
    }

    #[test]
    fn a_whole_document_is_scrubbed_keys_and_all_values() {
        let p = someone();
        let v = serde_json::json!({"a": ["/home/ada/x y", {"b": "ada"}], "n": 3});
        let clean = scrub_json(v.clone(), &p);
        assert_eq!(clean, serde_json::json!({"a": ["~/x y", {"b": "(user)"}], "n": 3}));
        assert_eq!(leaks(&v, &p).len(), 2);
        assert!(leaks(&clean, &p).is_empty());
    }
}
