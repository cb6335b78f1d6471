use super::*;

#[derive(Default)]
struct Recorder {
    logs: Mutex<Vec<(LogLevel, String)>>,
}

impl HostApi for Recorder {
    fn log(&self, level: LogLevel, _target: &str, message: &str, _fields_json: &str) {
        if let Ok(mut logs) = self.logs.lock() {
            logs.push((level, message.to_string()));
        }
    }
    fn call(&self, method: &str, payload_json: &str) -> Result<String, EngineError> {
        match method {
            "echo" => Ok(payload_json.to_string()),
            other => Err(EngineError::unsupported(other)),
        }
    }
}

#[test]
fn a_status_outside_the_header_is_named_as_the_engines_error() {
    let e = status_error("assemble", 42, Ok(Some("boom".into())));
    assert_eq!(e.kind, ErrorKind::Incompatible);
    assert!(e.message.contains("status 42"), "{}", e.message);
    assert!(e.message.contains("boom"), "{}", e.message);
    let e = status_error("assemble", -1, Ok(None));
    assert!(e.message.contains("status -1"), "{}", e.message);
}

#[test]
fn a_known_status_becomes_its_error_kind_with_the_engines_message() {
    let e = status_error("assemble", 2, Ok(Some("messages is not an array".into())));
    assert_eq!(e.kind, ErrorKind::InvalidParams);
    assert_eq!(e.message, "messages is not an array");
    let e = status_error("ingest", 1, Ok(None));
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(e.message.contains("ingest"), "{}", e.message);
}

/// The host table answers a service with a NUL-terminated buffer the engine gives back once; a
/// second give-back of the same pointer is logged and ignored, not freed twice.
#[test]
fn host_answers_are_nul_terminated_and_a_double_free_is_ignored() {
    let recorder = Arc::new(Recorder::default());
    let state = HostState {
        services: recorder.clone(),
        outstanding: Mutex::new(HashMap::new()),
    };
    let data = &state as *const HostState as *mut c_void;
    let (mut out, mut len): (*mut c_char, usize) = (std::ptr::null_mut(), 0);
    let payload = b"{\"a\":1}";
    // SAFETY: valid pointers for the call; `state` outlives it.
    let status = unsafe {
        host_call(
            data,
            c"echo".as_ptr(),
            payload.as_ptr().cast(),
            payload.len(),
            &mut out,
            &mut len,
        )
    };
    assert_eq!(status, 0);
    assert_eq!(len, payload.len());
    // SAFETY: the host wrote a NUL-terminated buffer of `len` bytes.
    let answer = unsafe { CStr::from_ptr(out) }.to_str().unwrap_or_default();
    assert_eq!(answer, "{\"a\":1}");
    // SAFETY: give back the buffer, then the same pointer once more.
    unsafe {
        host_free(data, out, len);
        host_free(data, out, len);
    }
    assert!(
        state
            .outstanding
            .lock()
            .map(|o| o.is_empty())
            .unwrap_or(false)
    );
    let logs = recorder.logs.lock().map(|l| l.clone()).unwrap_or_default();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0].0, LogLevel::Error);

    // An unknown service answers RAMPART_UNSUPPORTED with a message.
    // SAFETY: as above.
    let status = unsafe {
        host_call(
            data,
            c"nope".as_ptr(),
            c"{}".as_ptr(),
            2,
            &mut out,
            &mut len,
        )
    };
    assert_eq!(status, ErrorKind::Unsupported.code() as i32);
    // SAFETY: as above.
    let message = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    assert!(message.contains("nope"), "{message}");
    // SAFETY: given back once.
    unsafe { host_free(data, out, len) };
}
