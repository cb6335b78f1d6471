//! An engine that misbehaves on purpose inside `assemble`, to check that the host contains
//! it: `config.fault` is
//! - `"loop"`: never returns (the per-call deadline must stop it);
//! - `"memory"`: allocates until it cannot (the memory cap must stop it);
//! - `"trap"`: executes `unreachable`;
//! - `"panic"`: panics (Rust's panic in wasm ends in a trap);
//! - `"fs"`: reads the file `config.file` (default `/etc/passwd`) and answers its first line as
//!   a system prompt addition, or fails with the error (kind 6) when it cannot;
//! - `"service"`: answers `state.dir`'s answer as a system prompt addition;
//! - anything else: answers the history unchanged.

use std::sync::Mutex;

use serde::Deserialize;

wit_bindgen::generate!({
    path: "../../engine-api/wit",
    world: "context-engine",
});

use exports::rampart::engine::engine::Guest;
use rampart::engine::host::service;
use rampart::engine::types::EngineError;

#[derive(Deserialize, Default, Clone)]
struct Config {
    #[serde(default)]
    fault: String,
    #[serde(default)]
    file: Option<String>,
}

#[derive(Deserialize)]
struct Hello {
    #[serde(rename = "engineId")]
    engine_id: String,
    #[serde(default)]
    config: Config,
}

static CONFIG: Mutex<Option<Config>> = Mutex::new(None);

fn engine_error(message: String) -> EngineError {
    EngineError {
        kind: 6,
        message,
        details: None,
    }
}

fn addition(text: &str) -> String {
    serde_json::json!({"messages": [], "systemPromptAddition": text}).to_string()
}

struct Faults;

impl Guest for Faults {
    fn hello(hello: String) -> Result<String, String> {
        let hello: Hello = serde_json::from_str(&hello).map_err(|e| e.to_string())?;
        *CONFIG.lock().unwrap() = Some(hello.config);
        Ok(serde_json::json!({
            "id": hello.engine_id,
            "name": "Faults",
            "version": "0.1.0",
            "protocol": {"protocol": "rampart-engine", "version": "1.1.0", "features": []},
        })
        .to_string())
    }

    fn call(method: String, payload: String) -> Result<String, EngineError> {
        if method != "assemble" {
            return Err(EngineError {
                kind: 1,
                message: format!("faults does not implement `{method}`"),
                details: None,
            });
        }
        let config = CONFIG.lock().unwrap().clone().unwrap_or_default();
        match config.fault.as_str() {
            "loop" => {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "trap" => core::arch::wasm32::unreachable(),
            "panic" => panic!("faults: told to panic"),
            "fs" => {
                let file = config.file.unwrap_or_else(|| "/etc/passwd".into());
                match std::fs::read_to_string(&file) {
                    Ok(text) => Ok(addition(text.lines().next().unwrap_or(""))),
                    Err(e) => Err(engine_error(format!("cannot read {file}: {e}"))),
                }
            }
            "service" => match service("state.dir", "{}") {
                Ok(answer) => Ok(addition(&answer)),
                Err(e) => Err(engine_error(format!(
                    "state.dir failed: kind {}: {}",
                    e.kind, e.message
                ))),
            },
            _ => Ok(payload),
        }
    }
}

export!(Faults);
