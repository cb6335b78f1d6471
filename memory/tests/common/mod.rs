//! Shared helpers: a workspace on disk, an index over it, test embedders, a loopback HTTP
//! server.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use rampart_memory::fixtures::FixtureModel;
use rampart_memory::{
    EmbedError, Embedder, IndexOptions, LocalEmbedder, MemoryIndex, MemorySettings, OpenReport,
};

/// A temporary agent: workspace, sessions directory and database path.
pub struct Agent {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub sessions: PathBuf,
    pub db: PathBuf,
}

impl Agent {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        let sessions = dir.path().join("sessions");
        fs::create_dir_all(&workspace).unwrap();
        fs::create_dir_all(&sessions).unwrap();
        let db = dir.path().join("state/memory/main.sqlite");
        Self {
            dir,
            workspace,
            sessions,
            db,
        }
    }

    /// Writes a workspace file (creating directories).
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.workspace.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    pub fn remove(&self, rel: &str) {
        fs::remove_file(self.workspace.join(rel)).unwrap();
    }

    pub fn options(
        &self,
        settings: MemorySettings,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> IndexOptions {
        IndexOptions {
            sessions_dir: Some(self.sessions.clone()),
            settings,
            embedder,
            ..IndexOptions::new(&self.db, &self.workspace)
        }
    }

    pub fn open(
        &self,
        settings: MemorySettings,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> (MemoryIndex, OpenReport) {
        MemoryIndex::open(self.options(settings, embedder)).unwrap()
    }

    /// Opens a keyword-only index with default settings.
    pub fn open_keyword(&self) -> MemoryIndex {
        self.open(MemorySettings::default(), None).0
    }
}

/// A model2vec model in a temporary directory, over `words`, with synonym pairs.
pub fn local_model(
    words: &[&str],
    synonyms: &[(&str, &str)],
    dims: usize,
) -> (tempfile::TempDir, Arc<LocalEmbedder>) {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("tiny-model");
    let mut model = FixtureModel::new(words, dims);
    model.synonyms = synonyms
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    model.write(&model_dir).unwrap();
    let embedder = Arc::new(LocalEmbedder::load(&model_dir).unwrap());
    (dir, embedder)
}

/// An embedder that can be told to fail, counting its calls and texts.
pub struct SwitchEmbedder {
    pub inner: Arc<dyn Embedder>,
    pub failing: AtomicBool,
    pub message: Mutex<String>,
    pub calls: AtomicUsize,
    pub texts: AtomicUsize,
}

impl SwitchEmbedder {
    pub fn new(inner: Arc<dyn Embedder>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            failing: AtomicBool::new(false),
            message: Mutex::new("embedding provider timeout".to_string()),
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
        })
    }

    pub fn fail_with(&self, message: &str) {
        *self.message.lock().unwrap() = message.to_string();
        self.failing.store(true, Ordering::SeqCst);
    }

    pub fn recover(&self) {
        self.failing.store(false, Ordering::SeqCst);
    }
}

impl Embedder for SwitchEmbedder {
    fn provider(&self) -> &str {
        self.inner.provider()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn dims(&self) -> Option<usize> {
        self.inner.dims()
    }
    fn provider_key(&self) -> String {
        self.inner.provider_key()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(EmbedError::Other {
                provider: self.provider().to_string(),
                message: self.message.lock().unwrap().clone(),
            });
        }
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts)
    }
}

/// A request the loopback server received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A one-thread HTTP/1.1 server on 127.0.0.1 that answers each request with `handler`
/// (status, JSON body) and records the requests. It serves until the test process ends.
pub struct Server {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

pub fn serve(handler: impl Fn(&Request, usize) -> (u16, String) + Send + 'static) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                continue;
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or("").to_string();
            let path = parts.next().unwrap_or("").to_string();
            let mut headers = Vec::new();
            let mut length = 0usize;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some((k, v)) = h.trim_end().split_once(':') {
                    let (k, v) = (k.trim().to_string(), v.trim().to_string());
                    if k.eq_ignore_ascii_case("content-length") {
                        length = v.parse().unwrap_or(0);
                    }
                    headers.push((k, v));
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            let request = Request {
                method,
                path,
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            };
            let (status, reply) = handler(&request, n);
            seen.lock().unwrap().push(request);
            let response = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    Server { base_url, requests }
}

/// A fake embedding answer: for each input, a 4-dim vector from its length and first byte.
pub fn fake_embeddings(request: &Request) -> String {
    let body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
    let inputs = body["input"].as_array().unwrap();
    let data: Vec<serde_json::Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let t = text.as_str().unwrap();
            let first = t.bytes().next().unwrap_or(0) as f64;
            serde_json::json!({"object": "embedding", "index": i, "embedding": [t.len() as f64, first, 1.0, 0.5]})
        })
        .collect();
    serde_json::json!({"object": "list", "data": data, "model": body["model"]}).to_string()
}

pub fn path_exists(p: &Path) -> bool {
    p.exists()
}
