use super::*;
use crate::engine::NeverCancelled;
use crate::export::dispatch;
use crate::host::{Host, HostApi, LogLevel};
use crate::protocol::method as names;

/// Every method's name reads back as the method, and equals the 1.0 constant engines use.
#[test]
fn names_round_trip_and_match_the_constants() {
    assert_eq!(Method::ALL.len(), names::ALL.len());
    for (method, constant) in Method::ALL.iter().zip(names::ALL) {
        assert_eq!(method.name(), *constant);
        assert_eq!(Method::from_name(method.name()), Some(*method));
    }
    assert_eq!(Method::from_name("summon_dragons"), None);
}

/// `FromStr`, `Display` and serde spell a method exactly as `call` does; an unknown name is
/// `unsupported` (parse) or an error naming it (serde), never another method.
#[test]
fn methods_parse_and_serialise_as_their_wire_names() {
    for m in Method::ALL {
        assert_eq!(m.name().parse::<Method>().unwrap(), *m);
        assert_eq!(m.to_string(), m.name());
        let json = serde_json::to_string(m).unwrap();
        assert_eq!(json, format!("\"{}\"", m.name()));
        assert_eq!(serde_json::from_str::<Method>(&json).unwrap(), *m);
    }
    assert_eq!(
        serde_json::to_string(&Method::PrepareSubagentSpawn).unwrap(),
        r#""prepare_subagent_spawn""#
    );
    let e = "summon_dragons".parse::<Method>().unwrap_err();
    assert_eq!(e.kind, crate::ErrorKind::Unsupported);
    assert!(e.message.contains("summon_dragons"), "{e}");
    let e = serde_json::from_str::<Method>(r#""summon_dragons""#).unwrap_err();
    assert!(e.to_string().contains("summon_dragons"), "{e}");
    assert!(serde_json::from_str::<Method>(r#""Assemble""#).is_err());
}

struct Quiet;
impl HostApi for Quiet {
    fn log(&self, _: LogLevel, _: &str, _: &str, _: &str) {}
    fn call(&self, method: &str, _: &str) -> Result<String, EngineError> {
        Err(EngineError::unsupported(method))
    }
}

/// An engine that implements only the required methods.
struct Minimal;
impl ContextEngine for Minimal {
    fn info(&self) -> EngineInfo {
        EngineInfo::default()
    }
    fn ingest(&self, _: &CallContext<'_>, _: IngestParams) -> Result<IngestResult, EngineError> {
        Ok(IngestResult::default())
    }
    fn assemble(
        &self,
        _: &CallContext<'_>,
        p: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        Ok(AssembleResult {
            messages: p.messages,
            ..Default::default()
        })
    }
    fn compact(&self, _: &CallContext<'_>, _: CompactParams) -> Result<CompactResult, EngineError> {
        Ok(CompactResult::default())
    }
}

/// Every method is dispatched by name: the required ones answer, the optional ones answer
/// `unsupported` with their own name, and a method from a later version answers
/// `unsupported` instead of failing.
#[test]
fn every_method_dispatches_by_name() {
    let host = Host::new(std::sync::Arc::new(Quiet));
    let cx = CallContext::new(&host, &NeverCancelled, None);
    for method in Method::ALL {
        let answer = dispatch(&Minimal, &cx, method.name(), "{}");
        match method {
            Method::Ingest | Method::Assemble | Method::Compact | Method::Dispose => {
                assert!(answer.is_ok(), "{method}: {answer:?}");
            }
            _ => {
                let e = answer.unwrap_err();
                assert_eq!(e.kind, crate::ErrorKind::Unsupported, "{method}");
                assert!(e.message.contains(method.name()), "{method}: {e}");
            }
        }
    }
    let e = dispatch(&Minimal, &cx, "summon_dragons", "{}").unwrap_err();
    assert_eq!(e.kind, crate::ErrorKind::Unsupported);
    let e = dispatch(&Minimal, &cx, "assemble", "{not json").unwrap_err();
    assert_eq!(e.kind, crate::ErrorKind::InvalidParams);
}
