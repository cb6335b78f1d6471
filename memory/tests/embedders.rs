//! The embedding providers: an OpenAI-compatible endpoint (a loopback server the test runs)
//! and a local model2vec model (generated in a temporary directory).

use std::fs;
use std::sync::Arc;
use std::time::Duration;

use rampart_memory::fixtures::{FixtureModel, TokenizerKind};
use rampart_memory::tools::call_tool;
use rampart_memory::{
    EmbedError, Embedder, LocalEmbedder, MemorySettings, OpenAiConfig, OpenAiEmbedder, SearchMode,
    SearchParams, SyncReason,
};
use serde_json::{Value, json};

use crate::common::{Agent, fake_embeddings, local_model, serve};

fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig {
        base_url: base_url.to_string(),
        api_key: Some("sk-test".to_string()),
        model: "text-embedding-3-small".to_string(),
        retry_backoff: Duration::from_millis(1),
        timeout: Duration::from_secs(10),
        ..OpenAiConfig::default()
    }
}

#[test]
fn openai_posts_model_and_input_and_reads_data_in_batches() {
    let server = serve(|req, _| (200, fake_embeddings(req)));
    let embedder = OpenAiEmbedder::new(OpenAiConfig {
        batch_size: 2,
        ..config(&server.base_url)
    })
    .unwrap();
    assert_eq!(embedder.dims(), None);
    let texts = ["a", "bb", "ccc", "dddd", "eeeee"];
    let vectors = embedder.embed(&texts).unwrap();
    assert_eq!(vectors.len(), 5);
    assert_eq!(vectors[2], vec![3.0, f32::from(b'c'), 1.0, 0.5]);
    assert_eq!(embedder.dims(), Some(4));
    let requests = server.requests.lock().unwrap();
    assert_eq!(requests.len(), 3, "5 texts in batches of 2");
    let first = &requests[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/embeddings");
    assert_eq!(first.header("authorization"), Some("Bearer sk-test"));
    let body: Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(
        body,
        json!({"model": "text-embedding-3-small", "input": ["a", "bb"]})
    );
}

#[test]
fn openai_without_a_key_sends_no_authorization_and_orders_by_index() {
    let server = serve(|req, _| {
        let mut v: Value = serde_json::from_str(&fake_embeddings(req)).unwrap();
        v["data"].as_array_mut().unwrap().reverse();
        (200, v.to_string())
    });
    let embedder = OpenAiEmbedder::new(OpenAiConfig {
        api_key: None,
        ..config(&server.base_url)
    })
    .unwrap();
    let vectors = embedder.embed(&["x", "yy"]).unwrap();
    assert_eq!(vectors[0][0], 1.0);
    assert_eq!(vectors[1][0], 2.0);
    assert_eq!(
        server.requests.lock().unwrap()[0].header("authorization"),
        None
    );
}

#[test]
fn exhausted_quota_is_a_quota_error_and_is_not_retried() {
    let server = serve(|_, _| {
        (429, json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}).to_string())
    });
    let embedder = OpenAiEmbedder::new(config(&server.base_url)).unwrap();
    let err = embedder.embed(&["x"]).unwrap_err();
    assert!(
        matches!(err, EmbedError::Quota { status: 429, .. }),
        "{err:?}"
    );
    assert!(err.is_quota());
    assert!(err.to_string().contains("insufficient_quota"), "{err}");
    assert_eq!(server.requests.lock().unwrap().len(), 1);
}

#[test]
fn a_rate_limit_and_server_errors_are_retried() {
    let server = serve(|req, n| match n {
        0 => (
            429,
            json!({"error": {"message": "Rate limit reached", "type": "requests"}}).to_string(),
        ),
        1 => (503, "upstream down".to_string()),
        _ => (200, fake_embeddings(req)),
    });
    let embedder = OpenAiEmbedder::new(config(&server.base_url)).unwrap();
    assert_eq!(embedder.embed(&["x"]).unwrap().len(), 1);
    assert_eq!(server.requests.lock().unwrap().len(), 3);

    let failing = serve(|_, _| (500, "boom".to_string()));
    let embedder = OpenAiEmbedder::new(OpenAiConfig {
        max_retries: 1,
        ..config(&failing.base_url)
    })
    .unwrap();
    let err = embedder.embed(&["x"]).unwrap_err();
    assert!(
        matches!(err, EmbedError::Http { status: 500, .. }),
        "{err:?}"
    );
    assert!(!err.is_quota());
    assert_eq!(failing.requests.lock().unwrap().len(), 2);
}

#[test]
fn auth_bad_answers_and_unreachable_servers_are_told_apart() {
    let auth = serve(|_, _| {
        (
            401,
            json!({"error": {"message": "Incorrect API key provided"}}).to_string(),
        )
    });
    let err = OpenAiEmbedder::new(config(&auth.base_url))
        .unwrap()
        .embed(&["x"])
        .unwrap_err();
    assert!(
        matches!(err, EmbedError::Auth { status: 401, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("check the key"), "{err}");

    let garbage = serve(|_, _| (200, "<html>not json</html>".to_string()));
    let err = OpenAiEmbedder::new(config(&garbage.base_url))
        .unwrap()
        .embed(&["x"])
        .unwrap_err();
    assert!(matches!(err, EmbedError::BadResponse { .. }), "{err:?}");

    let short = serve(|_, _| (200, json!({"data": []}).to_string()));
    let err = OpenAiEmbedder::new(config(&short.base_url))
        .unwrap()
        .embed(&["x"])
        .unwrap_err();
    assert!(
        err.to_string().contains("0 vectors came back for 1 texts"),
        "{err}"
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let err = OpenAiEmbedder::new(OpenAiConfig {
        max_retries: 0,
        ..config(&url)
    })
    .unwrap()
    .embed(&["x"])
    .unwrap_err();
    assert!(matches!(err, EmbedError::Network { .. }), "{err:?}");
    assert!(
        err.to_string().contains("check that the server is running"),
        "{err}"
    );
}

#[test]
fn memory_search_reports_case_20_failures_through_the_tool() {
    let agent = Agent::new();
    agent.write("MEMORY.md", "anything at all\n");
    for (status, body, warning) in [
        (
            429,
            json!({"error": {"message": "quota exceeded", "code": "insufficient_quota"}})
                .to_string(),
            "Memory search is unavailable because the embedding provider quota is exhausted.",
        ),
        (
            400,
            json!({"error": {"message": "model not found"}}).to_string(),
            "Memory search is unavailable due to an embedding/provider error.",
        ),
    ] {
        let server = serve(move |_, _| (status, body.clone()));
        let embedder = Arc::new(OpenAiEmbedder::new(config(&server.base_url)).unwrap());
        let agent_db = agent.dir.path().join(format!("db-{status}.sqlite"));
        let mut options = agent.options(MemorySettings::default(), Some(embedder));
        options.db_path = agent_db;
        let (index, _) = rampart_memory::MemoryIndex::open(options).unwrap();
        let result = call_tool(&index, "memory_search", &json!({"query": "anything"}));
        assert_eq!(result["results"], json!([]));
        assert_eq!(result["disabled"], json!(true));
        assert_eq!(result["unavailable"], json!(true));
        assert_eq!(result["warning"], json!(warning));
        assert!(
            result["error"]
                .as_str()
                .unwrap()
                .contains(&status.to_string()),
            "{result}"
        );
        assert!(
            result["action"]
                .as_str()
                .unwrap()
                .ends_with("retry memory_search.")
        );
    }
}

#[test]
fn an_openai_compatible_server_serves_hybrid_search_end_to_end() {
    let server = serve(|req, _| (200, fake_embeddings(req)));
    let agent = Agent::new();
    agent.write("memory/a.md", "The backup runs nightly at two.\n");
    let embedder = Arc::new(OpenAiEmbedder::new(config(&server.base_url)).unwrap());
    let (index, _) = agent.open(MemorySettings::default(), Some(embedder));
    let report = index.sync(SyncReason::Manual).unwrap();
    assert_eq!(report.embeddings_computed, 1);
    let outcome = index
        .search("backup nightly", &SearchParams::default())
        .unwrap();
    assert_eq!(outcome.mode, SearchMode::Hybrid);
    assert_eq!(outcome.provider.as_deref(), Some("openai"));
    assert_eq!(outcome.results[0].path, "memory/a.md");
    let status = index.status();
    assert_eq!(status.provider_summary, "openai/text-embedding-3-small");
    assert_eq!(status.chunks_with_vectors, 1);
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>() / (norm(a) * norm(b))
}

#[test]
fn a_local_model2vec_model_loads_and_embeds_by_mean_pooling() {
    let (_dir, model) = local_model(
        &["cat", "kitten", "invoice", "tax", "dog"],
        &[("cat", "kitten")],
        32,
    );
    assert_eq!(model.provider(), "local");
    assert_eq!(model.model(), "tiny-model");
    assert_eq!(model.dims(), Some(32));
    assert_eq!(model.provider_key().len(), 16);
    let v = model
        .embed(&["Cat", "kitten", "invoice tax", "cat dog", "unknownword"])
        .unwrap();
    assert_eq!(v.len(), 5);
    assert!((norm(&v[0]) - 1.0).abs() < 1e-4, "normalised");
    assert!(
        cos(&v[0], &v[1]) > 0.999,
        "synonyms share a row; case is folded"
    );
    assert!(cos(&v[0], &v[2]) < 0.9);
    // Mean of two rows: close to both, equal to neither.
    assert!(cos(&v[3], &v[0]) > 0.3 && cos(&v[3], &v[0]) < 0.99);
    // Only unknown tokens: nothing to pool, a zero vector.
    assert!(norm(&v[4]) < 1e-6);
    assert!(model.embed(&[]).unwrap().is_empty());
}

#[test]
fn a_wordlevel_tokenizer_goes_through_the_tokenizers_crate() {
    let dir = tempfile::tempdir().unwrap();
    let mut fixture = FixtureModel::new(&["red", "green", "blue"], 8);
    fixture.tokenizer = TokenizerKind::WordLevel;
    fixture.write(dir.path()).unwrap();
    let model = LocalEmbedder::load(dir.path()).unwrap();
    let v = model.embed(&["red green", "blue"]).unwrap();
    assert_eq!(v.len(), 2);
    assert!((norm(&v[0]) - 1.0).abs() < 1e-4);
}

#[test]
fn a_broken_model_directory_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    FixtureModel::new(&["a"], 4).write(dir.path()).unwrap();
    fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let err = LocalEmbedder::load(dir.path()).unwrap_err();
    assert!(matches!(err, EmbedError::Model { .. }));
    assert!(err.to_string().contains("tokenizer.json"), "{err}");

    FixtureModel::new(&["a"], 4).write(dir.path()).unwrap();
    fs::write(
        dir.path().join("model.safetensors"),
        b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}",
    )
    .unwrap();
    let err = LocalEmbedder::load(dir.path()).unwrap_err();
    assert!(matches!(err, EmbedError::Model { .. }), "{err:?}");
    assert!(err.to_string().contains("model2vec model"), "{err}");
}
