//! The YAML-ish front matter of a SKILL.md: `key: value` lines between two `---` lines.
//!
//! Only what skills use is understood: one value per key, optional quotes, and folded (`>`)
//! or literal (`|`) blocks of indented lines. Anything else (lists, nesting) is kept as the
//! raw text of its first line or ignored; a skill never fails to load over its front matter.

/// The fields of a front matter block, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrontMatter {
    fields: Vec<(String, String)>,
}

impl FrontMatter {
    /// The value of `key` (the first one, if repeated).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `key` is set to a true value (`true`, `yes`, `on`, `1`, any case).
    pub fn flag(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "true" | "yes" | "on" | "1"
            )
        })
    }
}

/// The front matter at the start of `text`, or an empty one when there is none.
pub fn parse_front_matter(text: &str) -> FrontMatter {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return FrontMatter::default();
    }
    let body: Vec<&str> = lines.take_while(|l| l.trim_end() != "---").collect();
    let mut fields = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        i += 1;
        if line.starts_with([' ', '\t']) || line.trim_start().starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_string();
        let value = value.trim();
        let block = matches!(value, "" | ">" | ">-" | "|" | "|-");
        if block {
            let mut parts = Vec::new();
            while i < body.len() && (body[i].starts_with([' ', '\t']) || body[i].trim().is_empty())
            {
                parts.push(body[i].trim());
                i += 1;
            }
            let joined = if value.starts_with('|') {
                parts.join("\n")
            } else {
                parts
                    .iter()
                    .filter(|p| !p.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            fields.push((key, joined.trim().to_string()));
        } else {
            fields.push((key, unquote(value).to_string()));
        }
    }
    FrontMatter { fields }
}

fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "frontmatter_tests.rs"]
mod tests;
