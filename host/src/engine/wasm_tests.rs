#![allow(clippy::unwrap_used)]

use super::*;

use std::sync::Mutex;

/// Records what the engine logged and answers every service `unsupported`.
#[derive(Default)]
struct Recorder {
    logs: Mutex<Vec<(LogLevel, String)>>,
}

impl HostApi for Recorder {
    fn log(&self, level: LogLevel, _target: &str, message: &str, _fields_json: &str) {
        self.logs.lock().unwrap().push((level, message.to_string()));
    }
    fn call(&self, method: &str, _payload: &str) -> Result<String, EngineError> {
        Err(EngineError::unsupported(method))
    }
}

#[test]
fn the_deadline_is_rounded_up_to_whole_ticks_plus_the_one_in_progress() {
    assert_eq!(ticks(Duration::ZERO), 1);
    assert_eq!(ticks(Duration::from_millis(1)), 2);
    assert_eq!(ticks(Duration::from_millis(500)), 51);
    assert_eq!(ticks(Duration::from_millis(505)), 52);
}

#[test]
fn stderr_is_cut_into_lines_however_it_is_written() {
    let recorder = Arc::new(Recorder::default());
    let last_words = Arc::new(Mutex::new(VecDeque::new()));
    let sink = stderr::LineSink::new("e", recorder.clone(), last_words.clone());
    for chunk in [
        &b"{\"level\":\"info\",\"message\":\"kept 5"[..],
        b"0 of 1200\"}\npanicked at src/lib.rs:1:1:\n",
        b"told to panic\nno newline yet",
    ] {
        sink.take(chunk);
    }
    let logs = recorder.logs.lock().unwrap().clone();
    assert_eq!(logs, [(LogLevel::Info, "kept 50 of 1200".to_string())]);
    let words: Vec<String> = last_words.lock().unwrap().iter().cloned().collect();
    assert_eq!(words, ["panicked at src/lib.rs:1:1:", "told to panic"]);
}
