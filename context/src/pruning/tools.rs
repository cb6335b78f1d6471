//! Which tools' results pruning may touch: `tools.allow` / `tools.deny` globs.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Serialize, Serializer};

/// Decides from a tool's name whether its results may be pruned.
///
/// Rules, as OpenClaw applies them:
/// - patterns are trimmed and compared case-insensitively (empty patterns are dropped);
/// - `*` matches any run of characters (including none); every other character is literal;
/// - a name matching a `deny` pattern is never pruned, even if `allow` matches it too;
/// - an empty `allow` list allows every tool not denied.
///
/// Why deny wins: deny is how a user protects one tool inside a broad allow (`allow: ["*"]`,
/// `deny: ["memory_*"]`); letting allow win would make that impossible to express.
#[derive(Clone, Default)]
pub struct ToolFilter {
    allow: Vec<String>,
    deny: Vec<String>,
    /// `None` when the list is empty, so the common "prune every tool" case matches nothing.
    allow_set: Option<GlobSet>,
    deny_set: Option<GlobSet>,
}

/// A pattern that is not a valid tool glob, with its position in its list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPattern {
    /// `"allow"` or `"deny"`.
    pub list: &'static str,
    /// The index of the pattern in that list.
    pub index: usize,
    /// What the glob compiler said.
    pub reason: String,
}

impl ToolFilter {
    /// A filter that lets every tool's results be pruned (the default: `tools: {}`).
    pub fn all() -> Self {
        Self::default()
    }

    /// Compiles `allow` and `deny` patterns.
    ///
    /// Errors name the first pattern that does not compile. With only `*` special and every
    /// other character escaped, that cannot happen for text patterns today; the error path is
    /// kept so that a future glob feature cannot fail silently.
    pub fn new<A, D>(allow: A, deny: D) -> Result<Self, BadPattern>
    where
        A: IntoIterator,
        A::Item: AsRef<str>,
        D: IntoIterator,
        D::Item: AsRef<str>,
    {
        let allow = normalise(allow);
        let deny = normalise(deny);
        let allow_set = compile("allow", &allow)?;
        let deny_set = compile("deny", &deny)?;
        Ok(Self {
            allow,
            deny,
            allow_set,
            deny_set,
        })
    }

    /// The normalised allow patterns (trimmed, lower-cased, empty ones dropped).
    pub fn allow(&self) -> &[String] {
        &self.allow
    }

    /// The normalised deny patterns.
    pub fn deny(&self) -> &[String] {
        &self.deny
    }

    /// Whether the results of `tool_name` may be pruned.
    pub fn is_prunable(&self, tool_name: &str) -> bool {
        if self.allow_set.is_none() && self.deny_set.is_none() {
            return true;
        }
        let name = tool_name.trim();
        if self.deny_set.as_ref().is_some_and(|set| set.is_match(name)) {
            return false;
        }
        self.allow_set.as_ref().is_none_or(|set| set.is_match(name))
    }
}

fn normalise<I>(patterns: I) -> Vec<String>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    patterns
        .into_iter()
        .map(|p| p.as_ref().trim().to_lowercase())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Turns OpenClaw's pattern language (only `*` is special) into a globset glob: every glob
/// metacharacter but `*` is escaped, and runs of `*` collapse to one, because globset gives
/// `**` a path meaning that tool names do not have.
fn to_glob(pattern: &str) -> String {
    let mut glob = String::with_capacity(pattern.len() + 4);
    for c in pattern.chars() {
        match c {
            // Never escaped, so a trailing `*` in the glob is always a wildcard.
            '*' if glob.ends_with('*') => {}
            '*' => glob.push('*'),
            '?' | '[' | ']' | '{' | '}' | '\\' | '!' | ',' => {
                glob.push('\\');
                glob.push(c);
            }
            _ => glob.push(c),
        }
    }
    glob
}

fn compile(list: &'static str, patterns: &[String]) -> Result<Option<GlobSet>, BadPattern> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut set = GlobSetBuilder::new();
    for (index, pattern) in patterns.iter().enumerate() {
        let glob = GlobBuilder::new(&to_glob(pattern))
            .case_insensitive(true)
            // `*` must match anything: tool names like `mcp/server:tool` have no path structure.
            .literal_separator(false)
            .backslash_escape(true)
            .build()
            .map_err(|e| BadPattern {
                list,
                index,
                reason: e.kind().to_string(),
            })?;
        set.add(glob);
    }
    set.build().map(Some).map_err(|e| BadPattern {
        list,
        index: 0,
        reason: e.kind().to_string(),
    })
}

impl std::fmt::Debug for ToolFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolFilter")
            .field("allow", &self.allow)
            .field("deny", &self.deny)
            .finish()
    }
}

impl PartialEq for ToolFilter {
    fn eq(&self, other: &Self) -> bool {
        self.allow == other.allow && self.deny == other.deny
    }
}

impl Serialize for ToolFilter {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Lists<'a> {
            allow: &'a [String],
            deny: &'a [String],
        }
        Lists {
            allow: &self.allow,
            deny: &self.deny,
        }
        .serialize(serializer)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn filter(allow: &[&str], deny: &[&str]) -> ToolFilter {
        ToolFilter::new(allow, deny).unwrap()
    }

    #[test]
    fn empty_allow_means_every_tool() {
        let f = ToolFilter::all();
        assert!(f.is_prunable("exec"));
        assert!(f.is_prunable(""));
        assert!(filter(&["  ", ""], &[]).is_prunable("anything"));
    }

    #[test]
    fn deny_wins_over_allow_case_insensitively() {
        // The reference case: allow `ex*`, deny `exec`, tools `Exec` and `Browser`.
        let f = filter(&["ex*"], &["exec"]);
        assert!(!f.is_prunable("Exec"));
        assert!(!f.is_prunable("Browser"));
        assert!(f.is_prunable("EXPORT"));
        assert!(f.is_prunable(" explain "));
    }

    #[test]
    fn only_star_is_special() {
        let f = filter(&["read?", "a[b]", "{x,y}", "mcp/*", "*__memory_*"], &[]);
        assert!(f.is_prunable("read?"));
        assert!(!f.is_prunable("reads"));
        assert!(f.is_prunable("a[b]"));
        assert!(!f.is_prunable("ab"));
        assert!(f.is_prunable("{x,y}"));
        assert!(!f.is_prunable("x"));
        assert!(f.is_prunable("mcp/server/tool"));
        assert!(f.is_prunable("mcp/"));
        assert!(f.is_prunable("vigil-harbor__memory_status"));
        // Runs of stars behave as one star.
        let f = filter(&["a**b"], &[]);
        assert!(f.is_prunable("ab"));
        assert!(f.is_prunable("a/x/b"));
        assert!(filter(&["*"], &[]).is_prunable("whatever"));
        assert!(!filter(&[], &["*"]).is_prunable("whatever"));
    }

    #[test]
    fn patterns_are_normalised() {
        let f = filter(&[" Read ", ""], &["EXEC"]);
        assert_eq!(f.allow(), ["read"]);
        assert_eq!(f.deny(), ["exec"]);
        assert_eq!(f, filter(&["read"], &["exec"]));
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            serde_json::json!({"allow": ["read"], "deny": ["exec"]})
        );
    }

    #[test]
    fn escaping_round_trips_odd_characters() {
        for name in [r"back\slash", "bang!", "comma,tool", "brace{", "star\\*"] {
            let f = filter(&[name], &[]);
            assert!(f.is_prunable(name), "{name}");
        }
    }
}
