//! The span-aware reader of `plugins.toml`: walks the document with byte spans, builds the
//! plugin part of [`Config`] and records where every key was written, so that errors in any
//! table point at their line and column.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use toml::de::DeValue;

use super::*;

/// The `models` and `agents` tables as written, before their readers give them types.
#[derive(Debug, Default)]
pub(super) struct RawTables {
    pub(super) models: toml::Table,
    pub(super) agents: toml::Table,
}

/// 1-based line and column (in characters) of byte `offset` in `text`, for a single lookup
/// (a syntax error); the validator, which asks for every key, uses [`LineIndex`].
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    LineIndex::new(text).line_col(text, offset)
}

/// Where each line of a config text starts, so that the position of a byte offset is a binary
/// search plus the characters between the line start and the offset.
///
/// Why: the validator records the line and column of every key it reads (errors and the
/// `models` / `agents` readers point at them). Counting newlines from the start of the file
/// for each key made a config of n engine tables cost O(n²): 20,000 tables took seconds.
/// Keys are read in document order, so the last lookup is remembered and a later offset on
/// the same line counts only the characters after it (a long line of inline tables stays
/// linear too).
#[derive(Debug)]
pub(super) struct LineIndex {
    /// Byte offset of the start of each line; the first is 0.
    starts: Vec<usize>,
    /// The last lookup: (offset, its 1-based column), for the next one on the same line.
    last: std::cell::Cell<(usize, usize)>,
}

impl LineIndex {
    /// Indexes `text`: one pass over its bytes.
    pub(super) fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(
                text.bytes()
                    .enumerate()
                    .filter(|&(_, b)| b == b'\n')
                    .map(|(i, _)| i + 1),
            )
            .collect();
        #[cfg(test)]
        scanned::add(text.len());
        Self {
            starts,
            last: std::cell::Cell::new((0, 1)),
        }
    }

    /// 1-based line and column (in characters) of byte `offset` in `text`, the text this
    /// index was built from.
    pub(super) fn line_col(&self, text: &str, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        // The number of line starts at or before `offset` is the 1-based line.
        let line = self.starts.partition_point(|&start| start <= offset);
        let line_start = self.starts[line - 1];
        let (last_offset, last_column) = self.last.get();
        let (from, column) = if last_offset >= line_start && last_offset <= offset {
            (last_offset, last_column)
        } else {
            (line_start, 1)
        };
        let column = column + text[from..offset].chars().count();
        #[cfg(test)]
        scanned::add(offset - from);
        self.last.set((offset, column));
        (line, column)
    }
}

/// Appends `key` to a dotted path, quoting it when it is not a bare TOML key.
fn join_key(prefix: &str, key: &str) -> String {
    let bare = is_valid_engine_id(key);
    let key = if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    };
    if prefix.is_empty() {
        key
    } else {
        format!("{prefix}.{key}")
    }
}

/// What a value is, for "found ..." in messages: `integer 5`, `string "yes"`, `table`.
fn describe(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => {
            let mut shown: String = s.chars().take(60).collect();
            if shown.len() < s.len() {
                shown.push('…');
            }
            format!("string {shown:?}")
        }
        DeValue::Integer(i) => format!("integer {i}"),
        DeValue::Float(x) => format!("float {}", x.as_str()),
        DeValue::Boolean(b) => format!("boolean {b}"),
        DeValue::Datetime(d) => format!("datetime {d}"),
        DeValue::Array(_) => "array".to_owned(),
        DeValue::Table(_) => "table".to_owned(),
    }
}

type SpannedValue<'i> = Spanned<DeValue<'i>>;

/// Walks the spanned document, building the [`Config`] and collecting located errors.
pub(super) struct Validator<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a Path,
    pub(super) errors: Vec<(usize, ConfigError)>,
    /// Where each key under `models` and `agents` was written, as `(line, column)`, by dotted
    /// key with `[i]` for array items (`models.providers.sim.models[0].contextWindow`).
    pub(super) positions: BTreeMap<String, (usize, usize)>,
    /// Line starts of `text`, for [`Validator::at`].
    pub(super) lines: LineIndex,
}

impl Validator<'_> {
    fn at(&self, span: &Range<usize>) -> (usize, usize) {
        self.lines.line_col(self.text, span.start)
    }

    fn base_dir(&self) -> PathBuf {
        match self.file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// Resolves a path from the file against the file's directory.
    fn resolve(&self, raw: &str) -> PathBuf {
        let p = Path::new(raw);
        if p.is_absolute() {
            return p.to_path_buf();
        }
        // Drop `./` so messages show `/etc/rampart/engines`, not `/etc/rampart/./engines`.
        let rest: PathBuf = p
            .components()
            .filter(|c| *c != std::path::Component::CurDir)
            .collect();
        self.base_dir().join(rest)
    }

    fn wrong_type(&mut self, key: &str, value: &SpannedValue<'_>, expected: &'static str) {
        let span = value.span();
        let (line, column) = self.at(&span);
        self.errors.push((
            span.start,
            ConfigError::WrongType {
                file: self.file.to_path_buf(),
                line,
                column,
                key: key.to_owned(),
                expected,
                found: describe(value.get_ref()),
            },
        ));
    }

    fn invalid(&mut self, key: &str, span: Range<usize>, found: String, allowed: &str) {
        let (line, column) = self.at(&span);
        self.errors.push((
            span.start,
            ConfigError::InvalidValue {
                file: self.file.to_path_buf(),
                line,
                column,
                key: key.to_owned(),
                found,
                allowed: allowed.to_owned(),
            },
        ));
    }

    /// Reports every key of `table` not in `allowed`.
    fn check_keys(&mut self, prefix: &str, table: &DeTable<'_>, allowed: &[&str]) {
        for key in table.keys() {
            if allowed.contains(&key.get_ref().as_ref()) {
                continue;
            }
            let span = key.span();
            let (line, column) = self.at(&span);
            self.errors.push((
                span.start,
                ConfigError::UnknownKey {
                    file: self.file.to_path_buf(),
                    line,
                    column,
                    key: join_key(prefix, key.get_ref()),
                    allowed: allowed.iter().map(|s| (*s).to_owned()).collect(),
                },
            ));
        }
    }

    fn table<'v, 'i>(&mut self, key: &str, value: &'v SpannedValue<'i>) -> Option<&'v DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => {
                self.wrong_type(key, value, "a table");
                None
            }
        }
    }

    fn string<'v>(&mut self, key: &str, value: &'v SpannedValue<'_>) -> Option<&'v str> {
        match value.get_ref() {
            DeValue::String(s) => Some(s),
            _ => {
                self.wrong_type(key, value, "a string");
                None
            }
        }
    }

    fn boolean(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(key, value, "a boolean (true or false)");
                None
            }
        }
    }

    fn millis(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<Duration> {
        let DeValue::Integer(i) = value.get_ref() else {
            self.wrong_type(key, value, "an integer (milliseconds)");
            return None;
        };
        match u64::from_str_radix(i.as_str(), i.radix()) {
            Ok(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Some(Duration::from_millis(ms)),
            _ => {
                let allowed = format!("an integer from 1 to {MAX_TIMEOUT_MS} (milliseconds)");
                self.invalid(key, value.span(), describe(value.get_ref()), &allowed);
                None
            }
        }
    }

    /// A non-empty path string, resolved against the config file's directory.
    fn path(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<PathBuf> {
        let raw = self.string(key, value)?;
        if raw.trim().is_empty() {
            self.invalid(
                key,
                value.span(),
                describe(value.get_ref()),
                "a non-empty path",
            );
            return None;
        }
        Some(self.resolve(raw))
    }

    /// The plugin part of the config, and the `models` and `agents` tables as TOML for their
    /// own readers (their keys' positions are in [`Validator::positions`]).
    pub(super) fn config(&mut self, root: &DeTable<'_>) -> (Config, RawTables) {
        let mut config = Config {
            source_file: Some(self.file.to_path_buf()),
            searched: Vec::new(),
            ..Config::default()
        };
        let mut raw = RawTables::default();
        self.check_keys("", root, TOP_KEYS);
        if let Some(v) = root.get("models")
            && let Some(t) = self.table("models", v)
        {
            raw.models = self.toml_table("models", t);
        }
        if let Some(v) = root.get("agents")
            && let Some(t) = self.table("agents", v)
        {
            raw.agents = self.toml_table("agents", t);
        }
        if let Some(v) = root.get("plugins")
            && let Some(t) = self.table("plugins", v)
        {
            self.plugins(t, &mut config);
        }
        if let Some(v) = root.get("session")
            && let Some(t) = self.table("session", v)
        {
            self.session(t, &mut config);
        }
        if let Some(v) = root.get("serve")
            && let Some(t) = self.table("serve", v)
        {
            self.serve(t, &mut config.serve);
        }
        (config, raw)
    }

    fn serve(&mut self, table: &DeTable<'_>, serve: &mut serve::ServeSettings) {
        self.check_keys("serve", table, SERVE_KEYS);
        if let Some(v) = table.get("listen")
            && let Some(s) = self.string("serve.listen", v)
        {
            match s.trim().parse::<std::net::SocketAddr>() {
                Ok(addr) => serve.listen = Some(addr),
                Err(_) => self.invalid(
                    "serve.listen",
                    v.span(),
                    describe(v.get_ref()),
                    "an address with a port, such as \"127.0.0.1:8787\" or \"[::1]:8787\"",
                ),
            }
        }
        if let Some(v) = table.get("authToken")
            && let Some(s) = self.string("serve.authToken", v)
        {
            if s.trim().is_empty() {
                self.invalid(
                    "serve.authToken",
                    v.span(),
                    "an empty string".to_owned(),
                    "a non-empty token (leave the key out to require none)",
                );
            } else {
                serve.auth_token = Some(s.trim().to_owned());
            }
        }
        for (name, slot, range) in [
            ("maxConcurrent", &mut serve.max_concurrent, 1..=4096),
            ("maxQueue", &mut serve.max_queue, 0..=1_000_000),
            ("maxConnections", &mut serve.max_connections, 1..=1_000_000),
            (
                "sessionCacheMiB",
                &mut serve.session_cache_mib,
                0..=1_048_576,
            ),
        ] {
            let key = format!("serve.{name}");
            if let Some(v) = table.get(name) {
                if !matches!(v.get_ref(), DeValue::Integer(_)) {
                    self.wrong_type(&key, v, "an integer");
                } else if let Some(n) = self.integer(&key, v) {
                    match usize::try_from(n) {
                        Ok(n) if range.contains(&n) => *slot = n,
                        _ => {
                            let allowed =
                                format!("an integer from {} to {}", range.start(), range.end());
                            self.invalid(&key, v.span(), describe(v.get_ref()), &allowed);
                        }
                    }
                }
            }
        }
        if let Some(v) = table.get("minAnswerTokens") {
            let key = "serve.minAnswerTokens";
            if !matches!(v.get_ref(), DeValue::Integer(_)) {
                self.wrong_type(key, v, "an integer");
            } else if let Some(n) = self.integer(key, v) {
                match u64::try_from(n) {
                    Ok(n) if (1..=1_000_000).contains(&n) => serve.min_answer_tokens = n,
                    _ => self.invalid(
                        key,
                        v.span(),
                        describe(v.get_ref()),
                        "an integer from 1 to 1000000 (answer tokens)",
                    ),
                }
            }
        }
        if let Some(v) = table.get("systemPrompt")
            && let Some(s) = self.string("serve.systemPrompt", v)
        {
            match s.trim() {
                "client" => serve.system_prompt = serve::SystemPromptSource::Client,
                "rampart" => serve.system_prompt = serve::SystemPromptSource::Rampart,
                "merge" => serve.system_prompt = serve::SystemPromptSource::Merge,
                _ => self.invalid(
                    "serve.systemPrompt",
                    v.span(),
                    describe(v.get_ref()),
                    "\"client\" (the client's own prompt), \"rampart\" (the built one) or \"merge\"",
                ),
            }
        }
        if let Some(v) = table.get("memoryTools")
            && let Some(b) = self.boolean("serve.memoryTools", v)
        {
            serve.memory_tools = b;
        }
        if let Some(v) = table.get("engineTools")
            && let Some(b) = self.boolean("serve.engineTools", v)
        {
            serve.engine_tools = b;
        }
        if let Some(v) = table.get("engineCredentials")
            && let Some(s) = self.string("serve.engineCredentials", v)
        {
            match s.trim() {
                "client" => serve.engine_credentials = serve::EngineCredentials::Client,
                "provider" => serve.engine_credentials = serve::EngineCredentials::Provider,
                "none" => serve.engine_credentials = serve::EngineCredentials::None,
                _ => self.invalid(
                    "serve.engineCredentials",
                    v.span(),
                    describe(v.get_ref()),
                    "\"client\" (the key the conversation's client presented), \"provider\" (the \
                     provider's apiKeyEnv only) or \"none\" (no model calls by the engine)",
                ),
            }
        }
        for (name, slot) in [
            ("headerTimeoutMs", &mut serve.header_timeout),
            ("bodyTimeoutMs", &mut serve.body_timeout),
            ("drainTimeoutMs", &mut serve.drain_timeout),
        ] {
            if let Some(v) = table.get(name)
                && let Some(d) = self.millis(&format!("serve.{name}"), v)
            {
                *slot = d;
            }
        }
        if let Some(v) = table.get("allowedHosts")
            && let Some(hosts) = self.serve_names(
                "serve.allowedHosts",
                v,
                serve::host_entry_problem,
                "a host name such as \"rampart.internal\" (no scheme, no port), or \"*\" for any",
            )
        {
            serve.allowed_hosts = hosts;
        }
        if let Some(v) = table.get("allowedOrigins")
            && let Some(origins) = self.serve_names(
                "serve.allowedOrigins",
                v,
                serve::origin_entry_problem,
                "an origin such as \"http://localhost:3000\" (scheme, host, optional port), or \"*\" for any",
            )
        {
            serve.allowed_origins = origins;
        }
        if let Some(v) = table.get("store")
            && let Some(t) = self.table("serve.store", v)
        {
            self.serve_store(t, &mut serve.store);
        }
        if let Some(v) = table.get("sideRequests")
            && let Some(t) = self.table("serve.sideRequests", v)
        {
            let rule = &mut serve.side_requests;
            self.check_keys("serve.sideRequests", t, SIDE_REQUEST_KEYS);
            if let Some(v) = t.get("enabled")
                && let Some(b) = self.boolean("serve.sideRequests.enabled", v)
            {
                rule.enabled = b;
            }
            let key = "serve.sideRequests.probeMaxTokens";
            if let Some(v) = t.get("probeMaxTokens") {
                if !matches!(v.get_ref(), DeValue::Integer(_)) {
                    self.wrong_type(key, v, "an integer");
                } else if let Some(n) = self.integer(key, v) {
                    match u64::try_from(n) {
                        Ok(n) => rule.probe_max_tokens = n,
                        Err(_) => self.invalid(
                            key,
                            v.span(),
                            describe(v.get_ref()),
                            "an integer of 0 or more (0: no probes)",
                        ),
                    }
                }
            }
            let key = "serve.sideRequests.smallModels";
            if let Some(v) = t.get("smallModels") {
                match v.get_ref() {
                    DeValue::Array(items) => {
                        let mut models = Vec::new();
                        for (i, item) in items.iter().enumerate() {
                            if let Some(s) = self.string(&format!("{key}[{i}]"), item) {
                                models.push(s.trim().to_owned());
                            }
                        }
                        rule.small_models = models;
                    }
                    _ => self.wrong_type(key, v, "an array of strings"),
                }
            }
        }
    }

    /// A list of names for `serve.allowedHosts` or `serve.allowedOrigins`, lowercased; each
    /// entry `problem` refuses is reported at its own place.
    fn serve_names(
        &mut self,
        key: &str,
        value: &SpannedValue<'_>,
        problem: fn(&str) -> Option<&'static str>,
        allowed: &str,
    ) -> Option<Vec<String>> {
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(key, value, "an array of strings");
            return None;
        };
        let mut names = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let item_key = format!("{key}[{i}]");
            if let Some(s) = self.string(&item_key, item) {
                let name = s.trim().to_ascii_lowercase();
                match problem(&name) {
                    None => names.push(name),
                    Some(why) => {
                        self.invalid(&item_key, item.span(), format!("{s:?} ({why})"), allowed)
                    }
                }
            }
        }
        Some(names)
    }

    /// `[serve.store]`. The URL is checked as the server will read it, without connecting;
    /// an error never repeats it (it could hold a password).
    fn serve_store(&mut self, table: &DeTable<'_>, store: &mut serve::StoreSettings) {
        self.check_keys("serve.store", table, STORE_KEYS);
        if let Some(v) = table.get("url")
            && let Some(s) = self.string("serve.store.url", v)
        {
            match rampart_store_postgres::PgStoreOptions::from_url(s) {
                Ok(_) => store.url = Some(s.trim().to_owned()),
                Err(e) => self.invalid(
                    "serve.store.url",
                    v.span(),
                    format!("a URL that cannot be used ({e})"),
                    "a PostgreSQL URL without a password, such as \
                     \"postgres://rampart@db.internal:5432/rampart\" (the password goes in the \
                     variable `passwordEnv` names)",
                ),
            }
        }
        if let Some(v) = table.get("passwordEnv")
            && let Some(s) = self.string("serve.store.passwordEnv", v)
        {
            let name = s.trim();
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                self.invalid(
                    "serve.store.passwordEnv",
                    v.span(),
                    describe(v.get_ref()),
                    "the name of an environment variable, such as \"RAMPART_STORE_PASSWORD\"",
                );
            } else {
                store.password_env = Some(name.to_owned());
            }
        }
        for (name, slot) in [
            ("poolSize", &mut store.pool_size),
            ("lockConnections", &mut store.lock_connections),
        ] {
            let key = format!("serve.store.{name}");
            if let Some(v) = table.get(name) {
                if !matches!(v.get_ref(), DeValue::Integer(_)) {
                    self.wrong_type(&key, v, "an integer");
                } else if let Some(n) = self.integer(&key, v) {
                    match usize::try_from(n) {
                        Ok(n) if (1..=1024).contains(&n) => *slot = Some(n),
                        _ => self.invalid(
                            &key,
                            v.span(),
                            describe(v.get_ref()),
                            "an integer from 1 to 1024",
                        ),
                    }
                }
            }
        }
    }

    fn session(&mut self, session: &DeTable<'_>, config: &mut Config) {
        self.check_keys("session", session, SESSION_KEYS);
        if let Some(v) = session.get("writeLockTimeoutMs")
            && let Some(d) = self.millis("session.writeLockTimeoutMs", v)
        {
            config.session.write_lock_timeout = d;
        }
        let key = "session.maxCompactionCheckpoints";
        if let Some(v) = session.get("maxCompactionCheckpoints") {
            if !matches!(v.get_ref(), DeValue::Integer(_)) {
                self.wrong_type(key, v, "an integer");
            } else if let Some(n) = self.integer(key, v) {
                match usize::try_from(n) {
                    Ok(n) if (1..=10_000).contains(&n) => {
                        config.session.max_compaction_checkpoints = n;
                    }
                    _ => self.invalid(
                        key,
                        v.span(),
                        describe(v.get_ref()),
                        "an integer from 1 to 10000",
                    ),
                }
            }
        }
    }

    fn plugins(&mut self, plugins: &DeTable<'_>, config: &mut Config) {
        self.check_keys("plugins", plugins, PLUGINS_KEYS);
        if let Some(v) = plugins.get("searchPaths") {
            config.search_paths = self.search_paths(v);
        }
        if let Some(v) = plugins.get("callTimeoutMs")
            && let Some(d) = self.millis("plugins.callTimeoutMs", v)
        {
            config.call_timeout = d;
        }
        if let Some(v) = plugins.get("loadTimeoutMs")
            && let Some(d) = self.millis("plugins.loadTimeoutMs", v)
        {
            config.load_timeout = d;
        }
        if let Some(v) = plugins.get("slots")
            && let Some(slots) = self.table("plugins.slots", v)
        {
            self.check_keys("plugins.slots", slots, SLOTS_KEYS);
            let key = "plugins.slots.contextEngine";
            if let Some(v) = slots.get("contextEngine")
                && let Some(s) = self.string(key, v)
            {
                let id = s.trim();
                if id.is_empty() {
                    // An empty string means "the default".
                } else if is_valid_engine_id(id) {
                    config.context_engine = id.to_owned();
                    config.context_engine_line = Some(self.at(&v.span()).0);
                } else {
                    self.invalid(key, v.span(), describe(v.get_ref()), ENGINE_ID_RULE);
                }
            }
            let key = "plugins.slots.memory";
            if let Some(v) = slots.get("memory")
                && let Some(s) = self.string(key, v)
            {
                let id = s.trim();
                if id.is_empty() {
                    // The default: the built-in memory engine.
                } else if is_valid_engine_id(id) {
                    config.memory_engine = id.to_owned();
                } else {
                    self.invalid(
                        key,
                        v.span(),
                        describe(v.get_ref()),
                        "\"none\", \"memory-core\", or the id of a memory engine",
                    );
                }
            }
        }
        if let Some(v) = plugins.get("engines")
            && let Some(engines) = self.table("plugins.engines", v)
        {
            for (id, value) in engines.iter() {
                if let Some(entry) = self.engine(id, value) {
                    config.engines.insert(entry.id.clone(), entry);
                }
            }
        }
    }

    fn search_paths(&mut self, value: &SpannedValue<'_>) -> Vec<PathBuf> {
        let key = "plugins.searchPaths";
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(key, value, "an array of strings");
            return Vec::new();
        };
        let mut paths = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if let Some(p) = self.path(&format!("{key}[{i}]"), item) {
                paths.push(p);
            }
        }
        paths
    }

    fn engine(
        &mut self,
        id: &Spanned<std::borrow::Cow<'_, str>>,
        value: &SpannedValue<'_>,
    ) -> Option<EngineEntry> {
        let prefix = join_key("plugins.engines", id.get_ref());
        let line = self.at(&id.span()).0;
        let valid_id = is_valid_engine_id(id.get_ref());
        if !valid_id {
            let found = format!("engine id {:?}", id.get_ref().as_ref());
            self.invalid("plugins.engines", id.span(), found, ENGINE_ID_RULE);
        }
        let table = self.table(&prefix, value)?;
        self.check_keys(&prefix, table, ENGINE_KEYS);
        let mut entry = EngineEntry {
            id: id.get_ref().to_string(),
            path: None,
            required: false,
            config: serde_json::Value::Object(serde_json::Map::new()),
            line,
            isolation: Isolation::default(),
            command: None,
        };
        if let Some(v) = table.get("path") {
            entry.path = self.path(&format!("{prefix}.path"), v);
        }
        if let Some(v) = table.get("command") {
            let key = format!("{prefix}.command");
            if id.get_ref() == BUILTIN_ENGINE_ID {
                self.invalid(
                    &key,
                    v.span(),
                    "a command for the built-in engine".to_string(),
                    "no `command`: `legacy` is built into the host; give your engine another id",
                );
            } else if table.get("path").is_some() {
                self.invalid(
                    &key,
                    v.span(),
                    "both `path` and `command`".to_string(),
                    "exactly one of them: `path` for an engine library, `command` for an \
                     executable that speaks the engine protocol",
                );
            } else {
                entry.command = self.command(&key, v);
            }
        }
        if let Some(v) = table.get("required")
            && let Some(b) = self.boolean(&format!("{prefix}.required"), v)
        {
            entry.required = b;
        }
        if let Some(v) = table.get("config") {
            let key = format!("{prefix}.config");
            if let Some(t) = self.table(&key, v) {
                entry.config = serde_json::Value::Object(self.json_object(&key, t));
            }
        }
        entry.isolation = self.isolation(&prefix, table, id.get_ref() == BUILTIN_ENGINE_ID);
        if entry.command.is_some()
            && matches!(entry.isolation, Isolation::InProcess | Isolation::Wasm(_))
            && let Some(v) = table.get("isolation")
        {
            self.invalid(
                &format!("{prefix}.isolation"),
                v.span(),
                describe(v.get_ref()),
                "\"process\" (the default) or no `isolation`: an engine given as a `command` is \
                 a program of its own and always runs in its own process",
            );
        }
        valid_id.then_some(entry)
    }

    /// `command = ["program", "arg", …]`: a non-empty array of strings whose first is not
    /// blank. A program with a directory in it is resolved against the config file's directory.
    fn command(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<EngineCommand> {
        let allowed = "a non-empty array of strings, the program first, such as \
                       [\"python3\", \"my_engine.py\"]";
        let DeValue::Array(items) = value.get_ref() else {
            self.invalid(key, value.span(), describe(value.get_ref()), allowed);
            return None;
        };
        let mut words = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let word = self.string(&format!("{key}[{i}]"), item)?;
            if word.contains('\0') {
                let found = format!("{word:?} (it holds a NUL byte)");
                self.invalid(
                    &format!("{key}[{i}]"),
                    item.span(),
                    found,
                    "a string without NUL",
                );
                return None;
            }
            words.push(word.to_string());
        }
        let Some(first) = words.first().cloned() else {
            self.invalid(key, value.span(), "an empty array".to_string(), allowed);
            return None;
        };
        if first.trim().is_empty() {
            let item = &items[0];
            self.invalid(
                &format!("{key}[0]"),
                item.span(),
                describe(item.get_ref()),
                "the program to run: a name found in PATH or a path",
            );
            return None;
        }
        let program = if first.contains(std::path::MAIN_SEPARATOR) || first.contains('/') {
            self.resolve(&first)
        } else {
            PathBuf::from(first)
        };
        Some(EngineCommand {
            program,
            args: words.split_off(1),
            dir: self.base_dir(),
        })
    }

    /// `isolation`, the `restart` and `limits` that only a child process can have, and the
    /// `wasm` table that only a WebAssembly engine can.
    fn isolation(&mut self, prefix: &str, table: &DeTable<'_>, built_in: bool) -> Isolation {
        #[derive(PartialEq)]
        enum Where {
            Host,
            Child,
            Wasm,
        }
        let key = format!("{prefix}.isolation");
        let mut place = if built_in { Where::Host } else { Where::Child };
        if let Some(v) = table.get("isolation")
            && let Some(s) = self.string(&key, v)
        {
            match s {
                "inprocess" => place = Where::Host,
                "process" | "wasm" if built_in => self.invalid(
                    &key,
                    v.span(),
                    describe(v.get_ref()),
                    "\"inprocess\": the built-in engine is part of the host and always runs in \
                     its process",
                ),
                "process" => place = Where::Child,
                "wasm" if !cfg!(feature = "wasm") => self.invalid(
                    &key,
                    v.span(),
                    describe(v.get_ref()),
                    "\"process\" or \"inprocess\": this rampart was built without WebAssembly \
                     engines; rebuild it with `cargo build --release --features wasm` to run a \
                     .wasm engine",
                ),
                "wasm" => place = Where::Wasm,
                _ => self.invalid(
                    &key,
                    v.span(),
                    describe(v.get_ref()),
                    "\"process\" (the default), \"inprocess\" or \"wasm\"",
                ),
            }
        }
        for (name, value) in table.iter() {
            let name = name.get_ref().as_ref();
            if place != Where::Child && (name == "restart" || name == "limits") {
                let found = format!("`{name}` of an engine that is not a child process");
                let allowed = "`restart` and `limits` only with isolation = \"process\" (the \
                               default for a library): an engine in the host's process cannot \
                               be restarted or limited; a wasm engine is limited by `wasm = { \
                               memoryMb }` and the call deadline";
                self.invalid(&format!("{prefix}.{name}"), value.span(), found, allowed);
            }
            if place != Where::Wasm && name == "wasm" {
                let found = "a `wasm` table for an engine that is not WebAssembly".to_string();
                let allowed = "`wasm = { dir, memoryMb }` only with isolation = \"wasm\" and \
                               `path` naming a .wasm component";
                self.invalid(&format!("{prefix}.wasm"), value.span(), found, allowed);
            }
        }
        match place {
            Where::Host => Isolation::InProcess,
            Where::Wasm => {
                // Beside a `command`, the command's own error says what is wrong.
                if table.get("path").is_none()
                    && table.get("command").is_none()
                    && let Some(v) = table.get("isolation")
                {
                    self.invalid(
                        &key,
                        v.span(),
                        "isolation = \"wasm\" without a `path`".to_string(),
                        "`path = \"engine.wasm\"` naming the WebAssembly component beside it",
                    );
                }
                let settings = match table.get("wasm") {
                    Some(v) => self.wasm(&format!("{prefix}.wasm"), v),
                    None => WasmSettings::default(),
                };
                Isolation::Wasm(settings)
            }
            Where::Child => {
                let mut settings = ProcessSettings::default();
                if let Some(v) = table.get("restart") {
                    settings.restart = self.restart(&format!("{prefix}.restart"), v);
                }
                if let Some(v) = table.get("limits") {
                    settings.limits = self.limits(&format!("{prefix}.limits"), v);
                }
                Isolation::Process(settings)
            }
        }
    }

    /// `wasm = { dir = "state", memoryMb = 256 }`.
    fn wasm(&mut self, key: &str, value: &SpannedValue<'_>) -> WasmSettings {
        let mut settings = WasmSettings::default();
        let Some(t) = self.table(key, value) else {
            return settings;
        };
        self.check_keys(key, t, WASM_KEYS);
        if let Some(v) = t.get("dir") {
            settings.dir = self.path(&format!("{key}.dir"), v);
        }
        if let Some(v) = t.get("memoryMb") {
            let allowed = format!("an integer from 1 to {MAX_WASM_MEMORY_MB} (MiB)");
            if let Some(mb) = self.bounded(
                &format!("{key}.memoryMb"),
                v,
                1,
                MAX_WASM_MEMORY_MB,
                &allowed,
            ) {
                settings.memory_mb = mb;
            }
        }
        settings
    }

    fn restart(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<RestartPolicy> {
        let t = self.table(key, value)?;
        self.check_keys(key, t, RESTART_KEYS);
        let max_key = format!("{key}.max");
        let max = match t.get("max") {
            None => 3,
            Some(v) => {
                let allowed = format!("an integer from 0 to {MAX_RESTARTS}");
                match self.bounded(&max_key, v, 0, u64::from(MAX_RESTARTS), &allowed) {
                    Some(n) => u32::try_from(n).ok()?,
                    None => return None,
                }
            }
        };
        let within_key = format!("{key}.within");
        let within = match t.get("within") {
            None => Duration::from_secs(600),
            Some(v) => {
                let text = self.string(&within_key, v)?;
                match parse_window(text) {
                    Some(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Duration::from_millis(ms),
                    _ => {
                        let allowed = "a duration from 1ms to 24h such as \"10m\", \"30s\", \
                                       \"1h\" or \"500ms\"";
                        self.invalid(&within_key, v.span(), describe(v.get_ref()), allowed);
                        return None;
                    }
                }
            }
        };
        Some(RestartPolicy { max, within })
    }

    fn limits(&mut self, key: &str, value: &SpannedValue<'_>) -> ProcessLimits {
        let mut limits = ProcessLimits::default();
        let Some(t) = self.table(key, value) else {
            return limits;
        };
        if let Some(why) = crate::platform::LIMITS_ABSENT {
            self.invalid(key, value.span(), describe(value.get_ref()), why);
            return limits;
        }
        self.check_keys(key, t, LIMITS_KEYS);
        if let Some(v) = t.get("memoryMb") {
            // Below 64 MiB the child cannot map the rampart binary and its threads.
            let allowed = format!("an integer from 64 to {MAX_MEMORY_MB} (MiB)");
            limits.memory_mb =
                self.bounded(&format!("{key}.memoryMb"), v, 64, MAX_MEMORY_MB, &allowed);
        }
        if let Some(v) = t.get("cpuSeconds") {
            let allowed = format!("an integer from 1 to {MAX_CPU_SECONDS} (seconds)");
            limits.cpu_seconds = self.bounded(
                &format!("{key}.cpuSeconds"),
                v,
                1,
                MAX_CPU_SECONDS,
                &allowed,
            );
        }
        limits
    }

    /// An integer in `min..=max`, or a located error saying `allowed`.
    fn bounded(
        &mut self,
        key: &str,
        value: &SpannedValue<'_>,
        min: u64,
        max: u64,
        allowed: &str,
    ) -> Option<u64> {
        if !matches!(value.get_ref(), DeValue::Integer(_)) {
            self.wrong_type(key, value, "an integer");
            return None;
        }
        let n = self.integer(key, value)?;
        match u64::try_from(n) {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.invalid(key, value.span(), describe(value.get_ref()), allowed);
                None
            }
        }
    }

    fn toml_table(&mut self, prefix: &str, table: &DeTable<'_>) -> toml::Table {
        let mut out = toml::Table::new();
        for (k, v) in table.iter() {
            let key = join_key(prefix, k.get_ref());
            if let Some(value) = self.toml_value(&key, v) {
                out.insert(k.get_ref().to_string(), value);
            }
        }
        out
    }

    fn toml_value(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<toml::Value> {
        let position = self.at(&value.span());
        self.positions.insert(key.to_owned(), position);
        Some(match value.get_ref() {
            DeValue::String(s) => toml::Value::String(s.to_string()),
            DeValue::Integer(_) => toml::Value::Integer(self.integer(key, value)?),
            DeValue::Float(_) => toml::Value::Float(self.float(key, value)?),
            DeValue::Boolean(b) => toml::Value::Boolean(*b),
            DeValue::Datetime(d) => toml::Value::Datetime(*d),
            DeValue::Array(items) => toml::Value::Array(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.toml_value(&format!("{key}[{i}]"), item))
                    .collect(),
            ),
            DeValue::Table(t) => toml::Value::Table(self.toml_table(key, t)),
        })
    }

    fn json_object(
        &mut self,
        prefix: &str,
        table: &DeTable<'_>,
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut out = serde_json::Map::new();
        for (k, v) in table.iter() {
            let key = join_key(prefix, k.get_ref());
            if let Some(value) = self.json_value(&key, v) {
                out.insert(k.get_ref().to_string(), value);
            }
        }
        out
    }

    fn json_value(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<serde_json::Value> {
        use serde_json::Value as J;
        Some(match value.get_ref() {
            DeValue::String(s) => J::String(s.to_string()),
            DeValue::Integer(_) => J::from(self.integer(key, value)?),
            DeValue::Float(_) => {
                let x = self.float(key, value)?;
                match serde_json::Number::from_f64(x) {
                    Some(n) => J::Number(n),
                    None => {
                        let found = describe(value.get_ref());
                        let allowed = "a finite number (JSON has no nan or inf)";
                        self.invalid(key, value.span(), found, allowed);
                        return None;
                    }
                }
            }
            DeValue::Boolean(b) => J::Bool(*b),
            DeValue::Datetime(d) => J::String(d.to_string()),
            DeValue::Array(items) => J::Array(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.json_value(&format!("{key}[{i}]"), item))
                    .collect(),
            ),
            DeValue::Table(t) => J::Object(self.json_object(key, t)),
        })
    }

    fn integer(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<i64> {
        let DeValue::Integer(i) = value.get_ref() else {
            return None;
        };
        match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Some(n),
            Err(_) => {
                let allowed = "an integer that fits in 64 bits";
                self.invalid(key, value.span(), describe(value.get_ref()), allowed);
                None
            }
        }
    }

    fn float(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<f64> {
        let DeValue::Float(x) = value.get_ref() else {
            return None;
        };
        match x.as_str().parse::<f64>() {
            Ok(f) => Some(f),
            Err(_) => {
                let allowed = "a TOML float";
                self.invalid(key, value.span(), describe(value.get_ref()), allowed);
                None
            }
        }
    }
}

/// A restart window as written (`"10m"`, `"30s"`, `"1h"`, `"500ms"`, `"1h30m"`), in ms.
///
/// Why not `rampart_context`'s duration parser: it is private to the pruning settings, and a
/// bare number there means minutes, which for a restart window would surprise; this accepts
/// only numbers with a unit.
pub(super) fn parse_window(text: &str) -> Option<u64> {
    const UNITS: [(&str, u64); 4] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let number: u64 = rest.get(..digits)?.parse().ok()?;
        rest = &rest[digits..];
        let (unit, ms) = UNITS.iter().find(|(u, _)| rest.starts_with(u))?;
        total = total.checked_add(number.checked_mul(*ms)?)?;
        rest = &rest[unit.len()..];
    }
    Some(total)
}

/// Bytes the position lookups have read, for the test that keeps them linear in the size of
/// the config.
#[cfg(test)]
pub(super) mod scanned {
    use std::cell::Cell;

    thread_local! {
        static BYTES: Cell<usize> = const { Cell::new(0) };
    }

    pub(in crate::config) fn add(bytes: usize) {
        BYTES.with(|b| b.set(b.get() + bytes));
    }

    /// Bytes read on this thread so far.
    pub(in crate::config) fn get() -> usize {
        BYTES.with(Cell::get)
    }
}
