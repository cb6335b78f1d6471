//! Layer 2: tool-result size control for the session (reference §4.2) and at ingest.
//!
//! Why this exists: one `cat` of a large file or a verbose build log can be larger than the
//! whole context window. Once such a result is in the session, every later request carries it
//! and compaction cannot summarise it away (the summariser has the same window). So results are
//! capped when they are persisted ([`cap_at_ingest`]), and, when a session still overflows, a
//! truncation plan shrinks the tool results already in it ([`plan_session_truncation`]).
//!
//! All lengths are counted in characters (Unicode scalar values), never bytes, and no cut ever
//! splits a character. Everything here is pure: the host stores the full original (as a blob)
//! and applies rewrites through the session's branch-and-re-append rewrite.

use std::borrow::{Borrow, Cow};

use serde::{Deserialize, Serialize};

use rampart_message::{AgentMessage, Content, ContentBlock, TextContent, ToolResultMessage};

/// Largest share of the context window one tool result may take, in tokens.
///
/// Why 0.3: a single result should leave room for the rest of the conversation, the system
/// prompt and the answer; OpenClaw uses this share and users' expectations follow it.
pub const MAX_TOOL_RESULT_CONTEXT_SHARE: f64 = 0.3;

/// The absolute cap on a tool result's text, in characters, whatever the window.
///
/// Why 40,000: it is the April 2026 reference value, which is the baseline every Rampart
/// default follows; hosts may override it (`toolResultMaxChars`).
pub const DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS: usize = 40_000;

/// Alias of [`DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS`], under the reference's other name, so code
/// ported from either name finds it.
pub const HARD_MAX_TOOL_RESULT_CHARS: usize = DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS;

/// The fewest characters truncation keeps of a result, whatever the budget.
///
/// Why: below about 2,000 characters a tool result stops being useful to the model (it cannot
/// tell what the tool did), so a tight budget is exceeded rather than emptying the result.
pub const MIN_KEEP_CHARS: usize = 2_000;

/// The minimum kept during overflow recovery, where getting the request to fit matters more
/// than keeping a useful excerpt.
pub const RECOVERY_MIN_KEEP_CHARS: usize = 0;

/// How far from the end the "important tail" detection looks, in characters.
///
/// Why: errors, summaries and closing JSON braces sit at the end of tool output; scanning more
/// than the last screenful would mostly find noise.
pub const IMPORTANT_TAIL_SCAN_CHARS: usize = 2_000;

/// The largest tail kept by a head-and-tail truncation, in characters.
pub const MAX_TAIL_CHARS: usize = 4_000;

/// The share of the budget given to the tail in a head-and-tail truncation.
pub const TAIL_SHARE: f64 = 0.3;

/// Inserted between the head and the tail of a head-and-tail truncation, so neither the model
/// nor a person mistakes the two excerpts for contiguous output.
pub const MIDDLE_OMISSION_MARKER: &str =
    "\n\n[... the middle of this output was omitted; its beginning and end are shown ...]\n\n";

/// Separates the kept text from the truncation notice, so the notice is never glued to the end
/// of the last kept line.
pub const NOTICE_SEPARATOR: &str = "\n";

/// The fixed end of every truncation notice (`[... N more characters truncated]`), so code can
/// recognise text that Rampart (rather than the tool) truncated.
pub const TRUNCATION_NOTICE_TAIL: &str = "more characters truncated";

/// Chars of the smallest notice, `[... 1 more characters truncated]`: the aggregate budget never
/// goes below it, since a truncated result is at least its notice.
pub const MIN_NOTICE_CHARS: usize = 33;

/// Heads cut at the last newline when it lies beyond this share of the head budget, so the
/// excerpt ends on a whole line without giving up much of the budget.
const HEAD_NEWLINE_SHARE: f64 = 0.8;

/// Tails start after the first newline when it lies within this share of the tail budget.
const TAIL_NEWLINE_SHARE: f64 = 0.2;

/// Words that make the end of an output worth keeping: a failure and its cause.
const ERROR_WORDS: [&[u8]; 9] = [
    b"error",
    b"exception",
    b"failed",
    b"fatal",
    b"traceback",
    b"panic",
    b"stack trace",
    b"errno",
    b"exit code",
];

/// Words that make the end of an output worth keeping: a result or a summary line.
const SUMMARY_WORDS: [&[u8]; 6] = [
    b"total",
    b"summary",
    b"result",
    b"complete",
    b"finished",
    b"done",
];

// ---------------------------------------------------------------------------
// Notices
// ---------------------------------------------------------------------------

/// The notice appended to truncated text: `[... N more characters truncated]`.
///
/// Why this exact shape: tests and users grep for it, and it states who truncated (Rampart, not
/// the tool) and how much. `N` is at least 1, because a notice for nothing cut is never shown.
pub fn format_truncation_notice(omitted_chars: usize) -> String {
    format_truncation_notice_with_ref(omitted_chars, None)
}

/// [`format_truncation_notice`] with a pointer to where the full original is kept, for
/// example `[... 4960000 more characters truncated; full output: blob sha256:ab12…]`.
///
/// Why: truncation must never lose data for a person; the host stores the original and this
/// tells whoever reads the transcript how to find it.
pub fn format_truncation_notice_with_ref(
    omitted_chars: usize,
    full_output_ref: Option<&str>,
) -> String {
    let n = omitted_chars.max(1);
    match full_output_ref {
        Some(reference) => {
            format!("[... {n} {TRUNCATION_NOTICE_TAIL}; full output: {reference}]")
        }
        None => format!("[... {n} {TRUNCATION_NOTICE_TAIL}]"),
    }
}

/// Characters reserved for separator plus notice when at most `total_chars` can be omitted.
/// The notice's digit count grows with the omitted count, so reserving for the whole text is an
/// upper bound and the final output never exceeds the budget plus this reserve.
fn notice_reserve(total_chars: usize, full_output_ref: Option<&str>) -> usize {
    let digits = decimal_digits(total_chars.max(1));
    // "[... " + N + " " + tail + "]"
    let base = 5 + digits + 1 + TRUNCATION_NOTICE_TAIL.len() + 1;
    let with_ref = match full_output_ref {
        // "; full output: " + ref
        Some(reference) => base + 15 + char_len(reference),
        None => base,
    };
    NOTICE_SEPARATOR.len() + with_ref
}

fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

// ---------------------------------------------------------------------------
// Character helpers (shared with the tool-loop guard)
// ---------------------------------------------------------------------------

/// Length in Unicode scalar values: what every budget here counts.
///
/// Characters are the bytes that are not UTF-8 continuation bytes (`0b10xx_xxxx`). Counting
/// them per 64-byte chunk into a `u8` lets the compiler vectorise the loop; on the 1M-token
/// session this is about 1.3× faster than `chars().count()`, and counting tool results is
/// nearly all the reduction plan's time.
pub(crate) fn char_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut continuation = 0usize;
    let mut chunks = bytes.chunks_exact(64);
    for chunk in &mut chunks {
        let mut n = 0u8; // at most 64
        for &b in chunk {
            n += u8::from((b as i8) < -0x40);
        }
        continuation += usize::from(n);
    }
    continuation += chunks
        .remainder()
        .iter()
        .filter(|&&b| (b as i8) < -0x40)
        .count();
    bytes.len() - continuation
}

/// Byte offset of the `n`th character (or the end when `n` is past it).
pub(crate) fn byte_offset(s: &str, n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
}

/// Byte offset where the last `n` characters start.
fn tail_byte_offset(s: &str, n: usize) -> usize {
    if n == 0 {
        return s.len();
    }
    s.char_indices().rev().nth(n - 1).map_or(0, |(i, _)| i)
}

/// `text[..end]` cut back to its last newline when that newline lies beyond `share` of
/// `budget_chars` (the newline itself is dropped); otherwise `end` unchanged.
pub(crate) fn cut_head_at_newline(
    text: &str,
    end: usize,
    budget_chars: usize,
    share: f64,
) -> usize {
    let Some(nl) = text[..end].rfind('\n') else {
        return end;
    };
    // Characters before the newline = budget minus those from it to the end of the head.
    let newline_char = budget_chars.saturating_sub(char_len(&text[nl..end]));
    if newline_char as f64 > budget_chars as f64 * share {
        nl
    } else {
        end
    }
}

/// Start of a tail beginning at `start`, moved past the first newline when that newline lies
/// within `TAIL_NEWLINE_SHARE` of the tail budget, so the tail starts on a whole line.
fn cut_tail_at_newline(text: &str, start: usize, budget_chars: usize) -> usize {
    let limit = budget_chars as f64 * TAIL_NEWLINE_SHARE;
    let window_end = byte_offset_from(text, start, limit.ceil() as usize + 1);
    match text[start..window_end].find('\n') {
        Some(rel) if (char_len(&text[start..start + rel]) as f64) < limit => start + rel + 1,
        _ => start,
    }
}

/// Byte offset `n` characters after byte offset `start`.
fn byte_offset_from(text: &str, start: usize, n: usize) -> usize {
    start + byte_offset(&text[start..], n)
}

/// Whether the end of `text` looks like it carries the outcome (an error, a summary, a closing
/// JSON object), so a truncation should keep it.
pub fn has_important_tail(text: &str) -> bool {
    let tail = &text[tail_byte_offset(text, IMPORTANT_TAIL_SCAN_CHARS)..];
    if tail.trim_end().ends_with('}') {
        return true;
    }
    let bytes = tail.as_bytes();
    ERROR_WORDS
        .iter()
        .chain(SUMMARY_WORDS.iter())
        .any(|word| contains_word(bytes, word))
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Case-insensitive search for `word` with word boundaries on both sides (ASCII word chars,
/// as a JavaScript `\b` sees them).
fn contains_word(hay: &[u8], word: &[u8]) -> bool {
    if word.is_empty() || hay.len() < word.len() {
        return false;
    }
    let first = word[0].to_ascii_lowercase();
    (0..=hay.len() - word.len()).any(|i| {
        hay[i].to_ascii_lowercase() == first
            && (i == 0 || !is_word_byte(hay[i - 1]))
            && hay[i..i + word.len()].eq_ignore_ascii_case(word)
            && hay.get(i + word.len()).is_none_or(|&b| !is_word_byte(b))
    })
}

// ---------------------------------------------------------------------------
// Text truncation
// ---------------------------------------------------------------------------

/// Options of [`truncate_tool_result_text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncateOptions<'a> {
    /// Keep at least this many characters of the original; see [`MIN_KEEP_CHARS`].
    pub min_keep_chars: usize,
    /// Where the host keeps the full original (for example `blob sha256:…`); named in the
    /// notice so a person can find what was cut.
    pub full_output_ref: Option<&'a str>,
}

impl Default for TruncateOptions<'_> {
    fn default() -> Self {
        Self {
            min_keep_chars: MIN_KEEP_CHARS,
            full_output_ref: None,
        }
    }
}

/// The outcome of [`truncate_tool_result_text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncated<'a> {
    /// The text to use: borrowed (the original) when nothing was cut.
    pub text: Cow<'a, str>,
    /// Characters of the original that are not in `text` (0 when nothing was cut). Marker and
    /// notice are not counted: this is what a reader of the truncated text does not see.
    pub omitted_chars: usize,
}

impl Truncated<'_> {
    /// True when something was cut.
    pub fn is_truncated(&self) -> bool {
        self.omitted_chars > 0
    }
}

/// Cuts `text` to about `max_chars` characters, notice included.
///
/// - Text within `max_chars` is returned unchanged (borrowed).
/// - The kept budget is `max(min_keep_chars, max_chars − notice)`; if that keeps everything,
///   nothing is cut.
/// - When the end looks important ([`has_important_tail`]) and the budget exceeds twice the
///   minimum, the head and the tail are kept (tail: 30 % of the budget, at most 4,000), with
///   [`MIDDLE_OMISSION_MARKER`] between them; otherwise the head only.
/// - The head ends at its last newline when that lies beyond 80 % of the head budget; the tail
///   starts after its first newline when that lies within 20 % of the tail budget.
/// - A notice with the real omitted count ends the text.
///
/// The result is never longer than `max(min_keep_chars, max_chars − reserve) + reserve`, where
/// `reserve` is the separator plus the notice for `text`'s length.
pub fn truncate_tool_result_text<'a>(
    text: &'a str,
    max_chars: usize,
    opts: &TruncateOptions<'_>,
) -> Truncated<'a> {
    // Cheap exit without counting: bytes bound characters from above.
    if text.len() <= max_chars {
        return Truncated {
            text: Cow::Borrowed(text),
            omitted_chars: 0,
        };
    }
    truncate_counted(text, char_len(text), max_chars, opts)
}

/// [`truncate_tool_result_text`] for a text whose length in characters (`total`) is known, so
/// a multi-megabyte result is counted once, not once per caller.
fn truncate_counted<'a>(
    text: &'a str,
    total: usize,
    max_chars: usize,
    opts: &TruncateOptions<'_>,
) -> Truncated<'a> {
    let unchanged = Truncated {
        text: Cow::Borrowed(text),
        omitted_chars: 0,
    };
    if total <= max_chars {
        return unchanged;
    }
    let reserve = notice_reserve(total, opts.full_output_ref);
    let budget = opts.min_keep_chars.max(max_chars.saturating_sub(reserve));
    if budget >= total {
        return unchanged;
    }

    let marker_len = char_len(MIDDLE_OMISSION_MARKER);
    let tail_budget = ((budget as f64 * TAIL_SHARE).floor() as usize).min(MAX_TAIL_CHARS);
    let head_and_tail = budget > 2 * opts.min_keep_chars
        && tail_budget > 0
        && budget > tail_budget + marker_len
        && has_important_tail(text);

    let (kept_head, kept_tail) = if head_and_tail {
        let head_budget = budget - tail_budget - marker_len;
        let head_end = cut_head_at_newline(
            text,
            byte_offset(text, head_budget),
            head_budget,
            HEAD_NEWLINE_SHARE,
        );
        let tail_start =
            cut_tail_at_newline(text, tail_byte_offset(text, tail_budget), tail_budget);
        (&text[..head_end], Some(&text[tail_start.max(head_end)..]))
    } else {
        let head_end =
            cut_head_at_newline(text, byte_offset(text, budget), budget, HEAD_NEWLINE_SHARE);
        (&text[..head_end], None)
    };

    let kept = char_len(kept_head) + kept_tail.map_or(0, char_len);
    let omitted = total - kept;
    let notice = format_truncation_notice_with_ref(omitted, opts.full_output_ref);
    let mut out = String::with_capacity(
        kept_head.len()
            + kept_tail.map_or(0, |t| t.len() + MIDDLE_OMISSION_MARKER.len())
            + NOTICE_SEPARATOR.len()
            + notice.len(),
    );
    out.push_str(kept_head);
    if let Some(tail) = kept_tail {
        out.push_str(MIDDLE_OMISSION_MARKER);
        out.push_str(tail);
    }
    out.push_str(NOTICE_SEPARATOR);
    out.push_str(&notice);
    Truncated {
        text: Cow::Owned(out),
        omitted_chars: omitted,
    }
}

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

/// `min(floor(context_window · 0.3) · 4, cap)`: the most characters one tool result may keep in a
/// window of `context_window` tokens.
///
/// Why chars = tokens · 4: it is the estimate every budget in the reference uses (pi's
/// chars/4), so caps agree with the token estimate that decides overflow.
pub fn calculate_max_tool_result_chars(context_window: u64, cap: usize) -> usize {
    let share_tokens = (context_window as f64 * MAX_TOOL_RESULT_CONTEXT_SHARE).floor();
    let chars = share_tokens * 4.0;
    if chars >= cap as f64 {
        cap
    } else {
        chars as usize
    }
}

/// The characters of a tool result's text blocks (or string content); 0 for other roles.
///
/// Why text only: images cannot be truncated, so they do not count towards what truncation can
/// act on.
pub fn tool_result_text_len(msg: &AgentMessage) -> usize {
    match msg {
        AgentMessage::ToolResult(tr) => content_text_len(&tr.content),
        _ => 0,
    }
}

fn content_text_len(content: &Content) -> usize {
    match content {
        Content::Text(text) => char_len(text),
        Content::Blocks(blocks) => blocks
            .iter()
            .map(|block| match block {
                ContentBlock::Text(t) => char_len(&t.text),
                _ => 0,
            })
            .sum(),
    }
}

/// True when `msg` is a tool result whose text exceeds
/// [`calculate_max_tool_result_chars`]`(context_window, DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS)`.
pub fn is_oversized_tool_result(msg: &AgentMessage, context_window: u64) -> bool {
    matches!(msg, AgentMessage::ToolResult(_))
        && tool_result_text_len(msg)
            > calculate_max_tool_result_chars(context_window, DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS)
}

/// A tool result after [`truncate_tool_result_message`].
#[derive(Debug, Clone, PartialEq)]
pub struct TruncatedMessage {
    /// The new message; every field but the text blocks is the original's.
    pub message: AgentMessage,
    /// Text characters of the original.
    pub original_chars: usize,
    /// Characters of the original no longer in the message.
    pub omitted_chars: usize,
}

/// Truncates a tool result's text to about `max_chars` with the default options; `None` when
/// `msg` is not a tool result or already fits. See [`truncate_tool_result_message_with`].
pub fn truncate_tool_result_message(
    msg: &AgentMessage,
    max_chars: usize,
) -> Option<TruncatedMessage> {
    truncate_tool_result_message_with(msg, max_chars, &TruncateOptions::default())
}

/// Truncates a tool result's text to about `max_chars` characters; `None` when `msg` is not a
/// tool result or nothing needs cutting.
///
/// The budget is shared among text blocks in proportion to their length, each block getting at
/// least `min_keep_chars` plus its notice, so one long block cannot starve a short one. Images
/// and other blocks are kept: they cannot be cut, and dropping one would change what the tool
/// said. String content stays a string, so the message keeps its shape on disk.
pub fn truncate_tool_result_message_with(
    msg: &AgentMessage,
    max_chars: usize,
    opts: &TruncateOptions<'_>,
) -> Option<TruncatedMessage> {
    let AgentMessage::ToolResult(tr) = msg else {
        return None;
    };
    let (content, omitted, total) = match &tr.content {
        Content::Text(text) => {
            if text.len() <= max_chars {
                return None;
            }
            let total = char_len(text);
            let cut = truncate_counted(text, total, max_chars, opts);
            if !cut.is_truncated() {
                return None;
            }
            (
                Content::Text(cut.text.into_owned()),
                cut.omitted_chars,
                total,
            )
        }
        Content::Blocks(blocks) => {
            // Count each block once; the counts serve the total, the shares and the cuts.
            let lens: Vec<usize> = blocks
                .iter()
                .map(|block| match block {
                    ContentBlock::Text(t) => char_len(&t.text),
                    _ => 0,
                })
                .collect();
            let total: usize = lens.iter().sum();
            if total <= max_chars {
                return None;
            }
            let mut omitted = 0;
            let mut out = Vec::with_capacity(blocks.len());
            for (block, &len) in blocks.iter().zip(&lens) {
                let ContentBlock::Text(t) = block else {
                    out.push(block.clone());
                    continue;
                };
                let share = (max_chars as u128 * len as u128 / total as u128) as usize;
                let floor = opts.min_keep_chars + notice_reserve(len, opts.full_output_ref);
                let cut = truncate_counted(&t.text, len, share.max(floor), opts);
                if cut.is_truncated() {
                    omitted += cut.omitted_chars;
                    out.push(ContentBlock::Text(TextContent {
                        text: cut.text.into_owned(),
                        text_signature: t.text_signature.clone(),
                        extra: t.extra.clone(),
                    }));
                } else {
                    out.push(block.clone());
                }
            }
            if omitted == 0 {
                return None;
            }
            (Content::Blocks(out), omitted, total)
        }
    };
    Some(TruncatedMessage {
        message: AgentMessage::ToolResult(ToolResultMessage {
            content,
            tool_call_id: tr.tool_call_id.clone(),
            tool_name: tr.tool_name.clone(),
            details: tr.details.clone(),
            is_error: tr.is_error,
            timestamp: tr.timestamp,
            extra: tr.extra.clone(),
        }),
        original_chars: total,
        omitted_chars: omitted,
    })
}

// ---------------------------------------------------------------------------
// Ingest cap
// ---------------------------------------------------------------------------

/// What [`cap_at_ingest`] did, so the host can log it and keep the original.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapReport {
    /// The cap applied, in characters.
    pub cap_chars: usize,
    /// Text characters of the original result.
    pub original_chars: usize,
    /// Characters of the original that are not in the persisted result.
    pub omitted_chars: usize,
    /// Where the full original is kept, as named in the notice (if the host gave one).
    pub full_output_ref: Option<String>,
}

/// The cap used when a tool result is persisted: `min(floor(window · 0.3) · 4, max_chars)`.
/// A `context_window` of 0 means "unknown", and only `tool_result_max_chars` applies; this keeps
/// an unresolved window from shrinking every result to the minimum.
pub fn ingest_cap_chars(context_window: u64, tool_result_max_chars: usize) -> usize {
    if context_window == 0 {
        tool_result_max_chars
    } else {
        calculate_max_tool_result_chars(context_window, tool_result_max_chars)
    }
}

/// Caps a tool result before it is persisted; `None` when it is not a tool result or fits.
///
/// Why at ingest: a result that is too big should never reach the session, because every later
/// turn would carry it. The cap is [`ingest_cap_chars`]; at least [`MIN_KEEP_CHARS`] are kept,
/// the tail is kept too when it looks important, cuts fall on newlines, and the notice says how
/// much was cut and, given `full_output_ref` (say `blob sha256:…`), where the original is.
/// The host writes the original under that reference; [`CapReport::omitted_chars`] is what it
/// records next to it.
pub fn cap_at_ingest(
    msg: &AgentMessage,
    context_window: u64,
    tool_result_max_chars: usize,
    full_output_ref: Option<&str>,
) -> Option<(AgentMessage, CapReport)> {
    let cap = ingest_cap_chars(context_window, tool_result_max_chars);
    let opts = TruncateOptions {
        min_keep_chars: MIN_KEEP_CHARS,
        full_output_ref,
    };
    let cut = truncate_tool_result_message_with(msg, cap, &opts)?;
    let report = CapReport {
        cap_chars: cap,
        original_chars: cut.original_chars,
        omitted_chars: cut.omitted_chars,
        full_output_ref: full_output_ref.map(str::to_owned),
    };
    Some((cut.message, report))
}

// ---------------------------------------------------------------------------
// Reduction plan over a session
// ---------------------------------------------------------------------------

/// How much truncating tool results could shrink a session, and why (reference §4.2).
///
/// Why: the precheck and the overflow loop must choose between truncating tool results and
/// compacting before doing either; this is the figure they choose on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReductionPotential {
    /// The per-result cap for this window ([`calculate_max_tool_result_chars`]).
    pub max_chars: usize,
    /// What all tool results together may keep: `max(max_chars, 33)`.
    pub aggregate_budget_chars: usize,
    /// Tool results in the session.
    pub tool_result_count: usize,
    /// Their text characters, together.
    pub total_tool_result_chars: usize,
    /// Tool results above `max_chars`.
    pub oversized_count: usize,
    /// Characters the oversized plan removes (each oversized result cut to `max_chars`).
    pub oversized_reducible_chars: usize,
    /// Further characters the aggregate plan removes after the oversized plan (newest results
    /// first, none below the minimum kept plus its notice).
    pub aggregate_reducible_chars: usize,
    /// Everything the combined plan removes: oversized plus aggregate. A lower bound, since
    /// newline cuts remove a little more.
    pub max_reducible_chars: usize,
}

/// One tool result the plan would shrink.
struct PlanItem {
    index: usize,
    size: usize,
    target: usize,
    oversized: bool,
    aggregate: bool,
}

fn reduction_plan<M: Borrow<AgentMessage>>(
    messages: &[M],
    max_chars: usize,
) -> (ReductionPotential, Vec<PlanItem>) {
    let aggregate_budget = max_chars.max(MIN_NOTICE_CHARS);
    let mut items: Vec<PlanItem> = Vec::new();
    let mut potential = ReductionPotential {
        max_chars,
        aggregate_budget_chars: aggregate_budget,
        ..ReductionPotential::default()
    };
    for (index, msg) in messages.iter().enumerate() {
        let msg = msg.borrow();
        if !matches!(msg, AgentMessage::ToolResult(_)) {
            continue;
        }
        let size = tool_result_text_len(msg);
        potential.tool_result_count += 1;
        potential.total_tool_result_chars += size;
        let mut item = PlanItem {
            index,
            size,
            target: size,
            oversized: false,
            aggregate: false,
        };
        if size > max_chars {
            // What truncation to `max_chars` leaves: the cap, or the minimum plus the notice.
            let floor = MIN_KEEP_CHARS + notice_reserve(size, None);
            item.target = size.min(max_chars.max(floor));
            item.oversized = true;
            potential.oversized_count += 1;
            potential.oversized_reducible_chars += size - item.target;
        }
        if size > 0 {
            items.push(item);
        }
    }

    let after_oversized: usize = items.iter().map(|i| i.target).sum();
    if items.len() >= 2 && after_oversized > aggregate_budget {
        let mut excess = after_oversized - aggregate_budget;
        // Newest first: items are in index order, so walk them backwards.
        for item in items.iter_mut().rev() {
            if excess == 0 {
                break;
            }
            let floor = MIN_KEEP_CHARS + notice_reserve(item.size, None);
            if item.target <= floor {
                continue;
            }
            let cut = (item.target - floor).min(excess);
            item.target -= cut;
            item.aggregate = true;
            excess -= cut;
            potential.aggregate_reducible_chars += cut;
        }
    }
    potential.max_reducible_chars =
        potential.oversized_reducible_chars + potential.aggregate_reducible_chars;
    items.retain(|i| i.target < i.size);
    (potential, items)
}

/// Sizes up the oversized and aggregate truncation plans for `messages` in a window of
/// `context_window`, with the default per-result cap. Reads only; costs one pass over the tool
/// results' text.
pub fn estimate_tool_result_reduction_potential<M: Borrow<AgentMessage>>(
    messages: &[M],
    context_window: u64,
) -> ReductionPotential {
    estimate_tool_result_reduction_potential_capped(
        messages,
        context_window,
        DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS,
    )
}

/// [`estimate_tool_result_reduction_potential`] with a configured per-result cap
/// (`toolResultMaxChars`) instead of the default.
pub fn estimate_tool_result_reduction_potential_capped<M: Borrow<AgentMessage>>(
    messages: &[M],
    context_window: u64,
    cap: usize,
) -> ReductionPotential {
    reduction_plan(
        messages,
        calculate_max_tool_result_chars(context_window, cap),
    )
    .0
}

/// True when truncating tool results would shrink the session at all: something is oversized
/// or the results together exceed the aggregate budget.
pub fn session_likely_has_oversized_tool_results<M: Borrow<AgentMessage>>(
    messages: &[M],
    context_window: u64,
) -> bool {
    let p = estimate_tool_result_reduction_potential(messages, context_window);
    p.oversized_count > 0 || p.aggregate_reducible_chars > 0
}

/// The edits that truncate a session's tool results, for the host to apply through the
/// session rewrite (branch and re-append; the original entries stay in the file).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionTruncationPlan {
    /// The window the plan was made for, in tokens.
    pub context_window: u64,
    /// The figures the plan was made from.
    pub potential: ReductionPotential,
    /// `(index in the given messages, replacement)`, in index order.
    pub edits: Vec<(usize, AgentMessage)>,
    /// Edits due to a result being oversized.
    pub oversized_truncated: usize,
    /// Edits due only to the aggregate budget.
    pub aggregate_truncated: usize,
    /// Why there is nothing to do, when there is nothing to do: `"empty session"` or
    /// `"no oversized or aggregate tool results"`.
    pub skip_reason: Option<&'static str>,
}

impl SessionTruncationPlan {
    /// True when the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// The line the host logs after applying the plan, in the reference's format so existing
    /// log searches keep working.
    pub fn log_line(&self) -> String {
        format!(
            "[tool-result-truncation] Truncated {} tool result(s) in session \
             (contextWindow={} maxChars={} aggregateBudgetChars={} oversized={} aggregate={})",
            self.edits.len(),
            self.context_window,
            self.potential.max_chars,
            self.potential.aggregate_budget_chars,
            self.oversized_truncated,
            self.aggregate_truncated,
        )
    }
}

/// Plans the in-session truncation of tool results (oversized plan plus aggregate plan) with
/// the default per-result cap. Used once per overflow, after compaction could not help.
pub fn plan_session_truncation<M: Borrow<AgentMessage>>(
    messages: &[M],
    context_window: u64,
) -> SessionTruncationPlan {
    plan_session_truncation_capped(messages, context_window, DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS)
}

/// [`plan_session_truncation`] with a configured per-result cap.
pub fn plan_session_truncation_capped<M: Borrow<AgentMessage>>(
    messages: &[M],
    context_window: u64,
    cap: usize,
) -> SessionTruncationPlan {
    let max_chars = calculate_max_tool_result_chars(context_window, cap);
    let (potential, items) = reduction_plan(messages, max_chars);
    let mut plan = SessionTruncationPlan {
        context_window,
        potential,
        edits: Vec::with_capacity(items.len()),
        oversized_truncated: 0,
        aggregate_truncated: 0,
        skip_reason: None,
    };
    if messages.is_empty() {
        plan.skip_reason = Some("empty session");
        return plan;
    }
    let opts = TruncateOptions::default();
    for item in &items {
        let msg = messages[item.index].borrow();
        if let Some(cut) = truncate_tool_result_message_with(msg, item.target, &opts) {
            if item.oversized {
                plan.oversized_truncated += 1;
            } else if item.aggregate {
                plan.aggregate_truncated += 1;
            }
            plan.edits.push((item.index, cut.message));
        }
    }
    if plan.edits.is_empty() {
        plan.skip_reason = Some("no oversized or aggregate tool results");
    }
    plan
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn char_len_matches_std() {
        let samples = [
            String::new(),
            "a".into(),
            "ä".repeat(33),
            "日本語🎉x".repeat(100),
            format!("{}é", "x".repeat(63)),
            format!("{}🎉", "x".repeat(62)),
        ];
        for s in &samples {
            for cut in 0..s.len().min(200) {
                if s.is_char_boundary(cut) {
                    assert_eq!(char_len(&s[cut..]), s[cut..].chars().count());
                }
            }
        }
    }

    #[test]
    fn notice_shape() {
        assert_eq!(
            format_truncation_notice(123),
            "[... 123 more characters truncated]"
        );
        assert_eq!(
            format_truncation_notice(0),
            "[... 1 more characters truncated]"
        );
        assert_eq!(char_len(&format_truncation_notice(1)), MIN_NOTICE_CHARS);
        assert_eq!(
            format_truncation_notice_with_ref(5, Some("blob sha256:ab")),
            "[... 5 more characters truncated; full output: blob sha256:ab]"
        );
    }

    #[test]
    fn notice_reserve_is_exact_for_the_whole_text() {
        for total in [1usize, 9, 10, 99, 100, 123_456] {
            for r in [None, Some("blob sha256:äb")] {
                let notice = format_truncation_notice_with_ref(total, r);
                assert_eq!(
                    notice_reserve(total, r),
                    NOTICE_SEPARATOR.len() + char_len(&notice)
                );
            }
        }
    }

    #[test]
    fn word_boundaries() {
        assert!(contains_word(b"Build FAILED.", b"failed"));
        assert!(contains_word(b"exit code: 2", b"exit code"));
        assert!(!contains_word(b"errors_found", b"error"));
        assert!(!contains_word(b"terror", b"error"));
        assert!(contains_word(b"error", b"error"));
        assert!(!contains_word(b"err", b"error"));
    }

    #[test]
    fn important_tail_kinds() {
        assert!(has_important_tail("lots of text\nerror: file not found\n"));
        assert!(has_important_tail("{\"a\": 1}\n  "));
        assert!(has_important_tail("Tests: 3 passed. Done"));
        assert!(!has_important_tail("just some ordinary prose here"));
    }

    #[test]
    fn cap_math() {
        assert_eq!(calculate_max_tool_result_chars(128_000, 40_000), 40_000);
        assert_eq!(calculate_max_tool_result_chars(32_000, 40_000), 38_400);
        assert_eq!(calculate_max_tool_result_chars(0, 40_000), 0);
        assert_eq!(ingest_cap_chars(0, 40_000), 40_000);
        assert_eq!(ingest_cap_chars(10_000, 40_000), 12_000);
    }

    #[test]
    fn head_and_tail_when_tail_is_an_error() {
        let mut text = String::new();
        for i in 0..3000 {
            text.push_str(&format!("line {i} of ordinary output\n"));
        }
        text.push_str("error: linking failed with exit code 1\n");
        let cut = truncate_tool_result_text(&text, 10_000, &TruncateOptions::default());
        assert!(cut.is_truncated());
        assert!(cut.text.contains(MIDDLE_OMISSION_MARKER));
        assert!(cut.text.contains("error: linking failed"));
        assert!(cut.text.starts_with("line 0 of ordinary output\n"));
        assert!(char_len(&cut.text) <= 10_000);
        // Cuts on newlines: the head ends a whole line, the tail starts one.
        let (head, rest) = cut.text.split_once(MIDDLE_OMISSION_MARKER).unwrap();
        assert!(head.ends_with("output"));
        assert!(rest.starts_with("line "));
        let kept = char_len(head) + char_len(rest.rsplit_once(NOTICE_SEPARATOR).unwrap().0);
        assert_eq!(cut.omitted_chars, char_len(&text) - kept);
    }
}
