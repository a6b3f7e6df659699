//! OpenAI-compatible servers as backends: one the user adds is measured in live mode and in
//! sweeps beside the embedded backends, under its own name, by the same client loop
//! (`lx sweep --target` and `lx live --target` in the CLI).

use lx_client::target::Target;
use serde::Deserialize;
use tauri::State;

use super::blocking;
use super::system::BackendAvailability;
use crate::error::{CmdError, CmdResult};
use crate::state::{AppState, Locked};

/// A server as the user describes it.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct ServerSpec {
    /// Its API's base address, up to and including `/v1`.
    pub url: String,
    /// What charts and results call it (default: the address's host and port).
    #[serde(default)]
    pub name: Option<String>,
    /// The model to ask for (default: the first one the server lists).
    #[serde(default)]
    pub model: Option<String>,
    /// Stream from `/v1/chat/completions` instead of `/v1/completions`.
    #[serde(default)]
    pub chat: bool,
}

impl ServerSpec {
    /// The server to reach, checked for a free name: not a backend's, nor another server's.
    fn server(&self, taken: &[String]) -> CmdResult<lx_openai::Server> {
        let mut server = lx_openai::Server::parse(self.url.trim()).map_err(CmdError::Server)?;
        if let Some(name) = self.name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
            server.name = name.to_string();
        }
        if lx_local::BackendKind::of(&server.name).is_some() || taken.contains(&server.name) {
            return Err(CmdError::Server(format!("'{}' is already the name of a backend or another server: give this one a name", server.name)));
        }
        server.model = self.model.as_deref().map(str::trim).filter(|m| !m.is_empty()).map(String::from);
        server.api = if self.chat { lx_openai::Api::Chat } else { lx_openai::Api::Completions };
        // The key stays in the environment: never in the page, the settings or a run file.
        server.api_key = std::env::var("LX_API_KEY").ok().filter(|k| !k.is_empty());
        Ok(server)
    }
}

/// The line under a server's name: where it is and which model it serves.
fn describe(info: &lx_engine::backend::BackendInfo) -> Vec<String> {
    vec![info.version.clone(), info.device.clone()]
}

/// Reach the server (its model list settles the model), then keep it as a backend. The
/// open model's tokenizer writes its prompts and counts what it streams back.
#[tauri::command]
pub async fn server_add(state: State<'_, AppState>, spec: ServerSpec) -> CmdResult<BackendAvailability> {
    let model = state.model.locked().clone().ok_or(CmdError::NoModel)?;
    let taken: Vec<String> = state.servers.locked().iter().map(|s| s.name.clone()).collect();
    let server = spec.server(&taken)?;
    let codec = std::sync::Arc::new(model.open.tokenizer.clone());
    let probe = server.clone();
    let info = blocking(move || lx_openai::ServerTarget::connect(probe, codec).map(|t| t.info().clone()))
        .await?
        .map_err(|e| CmdError::Server(e.to_string()))?;
    let mut servers = state.servers.locked();
    if servers.iter().any(|s| s.name == server.name) {
        return Err(CmdError::Server(format!("'{}' was added meanwhile", server.name)));
    }
    servers.push(server.clone());
    Ok(BackendAvailability::server(&server.name, describe(&info)))
}

/// Forget a server: live mode and sweeps no longer reach it (a running session keeps the
/// connection it has until its settings drop it).
#[tauri::command]
pub async fn server_remove(state: State<'_, AppState>, name: String) -> CmdResult<()> {
    let mut servers = state.servers.locked();
    let before = servers.len();
    servers.retain(|s| s.name != name);
    if servers.len() == before {
        return Err(CmdError::Server(format!("no server is called '{name}'")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(url: &str, name: Option<&str>) -> ServerSpec {
        ServerSpec { url: url.into(), name: name.map(String::from), model: Some(" m ".into()), chat: true }
    }

    #[test]
    fn a_server_gets_a_free_name_and_its_settings() {
        let s = spec("http://127.0.0.1:8080/v1/", None).server(&[]).unwrap();
        assert_eq!((s.name.as_str(), s.base_url.as_str(), s.model.as_deref(), s.api), ("127.0.0.1:8080", "http://127.0.0.1:8080/v1", Some("m"), lx_openai::Api::Chat));
        let s = spec("http://gpu-box:8000/v1", Some(" vllm ")).server(&[]).unwrap();
        assert_eq!(s.name, "vllm");
    }

    #[test]
    fn a_taken_name_or_a_bad_address_is_refused_with_the_reason() {
        let taken = |url, name: Option<&str>, others: &[String]| match spec(url, name).server(others) {
            Err(CmdError::Server(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert!(taken("http://h:1/v1", Some("llama"), &[]).contains("already the name"));
        assert!(taken("http://h:1/v1", None, &["h:1".into()]).contains("already the name"));
        assert!(taken("h:1/v1", None, &[]).contains("starts with http://"));
    }
}
