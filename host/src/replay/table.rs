//! The replay on screen: a header, one row per model call as it happens, a progress bar on
//! long replays, and the closing summary.
//!
//! The progress bar is drawn on stderr, and only when stderr is a terminal (a pipe or a file
//! gets clean rows only). Rows go to stdout; when both are the same terminal the bar is cleared
//! before each row and drawn again after it, so the two never mix on one line.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use super::drive::Description;
use super::source::Recorded;
use super::summary::{Row, Summary};
use crate::terminal::escape;

/// Replays with at least this many calls get a progress bar.
pub const PROGRESS_MIN_CALLS: usize = 20;

/// The bar is redrawn at most this often, so drawing costs nothing next to the replay.
const REDRAW_EVERY: Duration = Duration::from_millis(100);

const BAR_WIDTH: usize = 30;

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in milliseconds, as a person reads it.
pub fn human_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

/// Bytes as MiB.
pub fn human_bytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The rows and the progress bar of one replay.
#[derive(Debug)]
pub struct Screen {
    rows_on_stdout: bool,
    total: usize,
    done: usize,
    bar: bool,
    /// Whether rows reach a terminal (then each is flushed, so the bar below it stays put).
    rows_on_terminal: bool,
    drawn: bool,
    last_draw: Option<Instant>,
}

impl Screen {
    /// A screen for `total` calls; rows are printed unless `json`.
    pub fn new(json: bool, total: usize) -> Self {
        Self {
            rows_on_stdout: !json,
            total,
            done: 0,
            bar: total >= PROGRESS_MIN_CALLS && std::io::stderr().is_terminal(),
            rows_on_terminal: std::io::stdout().is_terminal(),
            drawn: false,
            last_draw: None,
        }
    }

    /// A line for the user on stderr (a warning), kept clear of the bar.
    pub fn note(&mut self, line: &str) {
        self.clear();
        eprintln!("{line}");
    }

    /// Prints `row` (unless JSON was asked for) and advances the bar.
    pub fn row(&mut self, out: &mut dyn Write, row: &Row) -> std::io::Result<()> {
        self.done += 1;
        if self.rows_on_stdout {
            if self.drawn {
                self.clear();
            }
            writeln!(out, "{}", format_row(row))?;
            if self.bar && self.rows_on_terminal {
                out.flush()?;
            }
        }
        if self.bar {
            let due = self.last_draw.is_none_or(|t| t.elapsed() >= REDRAW_EVERY);
            if due || self.done == self.total {
                self.draw();
            }
        }
        Ok(())
    }

    /// Removes the bar at the end.
    pub fn finish(&mut self) {
        self.clear();
    }

    fn draw(&mut self) {
        let total = self.total.max(1);
        let filled = (self.done.min(total) * BAR_WIDTH) / total;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{}{}] {}/{} calls",
            "#".repeat(filled),
            "-".repeat(BAR_WIDTH - filled),
            self.done,
            self.total
        );
        let _ = err.flush();
        self.drawn = true;
        self.last_draw = Some(Instant::now());
    }

    fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

/// The lines before the rows: what is replayed, against what, and the column heads.
pub fn write_header(
    out: &mut dyn Write,
    recorded: &Recorded,
    d: Description,
) -> std::io::Result<()> {
    let of = if recorded.sessions_in_file > 1 {
        format!(
            ", session {} of {} in the file (--session-index)",
            recorded.index, recorded.sessions_in_file
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "replay: {} ({}{of}; {} messages, {} user turns, {} calls)",
        escape(&recorded.file.display().to_string()),
        recorded.format,
        recorded.messages.len(),
        recorded.user_turns(),
        recorded.calls()
    )?;
    let served = if d.served_by != d.engine {
        format!(" (served by {})", d.served_by)
    } else {
        String::new()
    };
    writeln!(
        out,
        "engine: {}{served}   model: {} (tokenizer {}, {} overflow wording)   window: {}",
        d.engine,
        d.model,
        d.tokenizer,
        d.wording,
        thousands(d.window)
    )?;
    for w in recorded.warnings.iter().take(3) {
        writeln!(out, "note: {}", escape(w))?;
    }
    if recorded.warnings.len() > 3 {
        writeln!(out, "note: … and {} more", recorded.warnings.len() - 3)?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:>5} {:>5} {:>9} {:>7} {:>4}  LAYERS",
        "TURN", "USER", "PROMPT", "%WIN", "REQ"
    )
}

/// One row of the table.
pub fn format_row(row: &Row) -> String {
    let prompt = row.prompt_tokens.map_or("–".to_string(), thousands);
    let pct = row
        .pct_window
        .map_or("–".to_string(), |p| format!("{p:.1}%"));
    let mut tags = if row.tags.is_empty() {
        "-".to_string()
    } else {
        row.tags.join(" ")
    };
    if let Some(agent) = &row.subagent {
        tags = format!("[subagent {}] {tags}", escape(agent));
    }
    format!(
        "{:>5} {:>5} {:>9} {:>7} {:>4}  {tags}",
        row.turn, row.user_turn, prompt, pct, row.requests
    )
}

/// The closing summary.
pub fn write_summary(out: &mut dyn Write, s: &Summary) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "summary")?;
    let errors = if s.errors == 0 {
        "no errors".to_string()
    } else {
        let kinds: Vec<String> = s
            .errors_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        format!("errors {}: {}", s.errors, kinds.join(", "))
    };
    writeln!(
        out,
        "  calls          {} (answered {}, {errors}); requests {}",
        s.calls, s.answered, s.requests
    )?;
    let peak_pct = if s.window > 0 {
        s.peak_prompt_tokens as f64 * 100.0 / s.window as f64
    } else {
        0.0
    };
    writeln!(
        out,
        "  prompt tokens  peak {} ({peak_pct:.1}% of {}), mean {}",
        thousands(s.peak_prompt_tokens),
        thousands(s.window),
        thousands(s.mean_prompt_tokens.round() as u64)
    )?;
    writeln!(
        out,
        "  compactions    {}{}",
        s.compactions,
        if s.compactions_not_done > 0 {
            format!(" ({} tried without compacting)", s.compactions_not_done)
        } else {
            String::new()
        }
    )?;
    if !s.subagents.is_empty() {
        let calls: u64 = s.subagents.iter().map(|a| a.calls).sum();
        let failed = s.subagents.iter().filter(|a| a.error.is_some()).count();
        writeln!(
            out,
            "  subagents      {} replayed at their parent's calls ({} calls of their own{})",
            s.subagents.len() - failed,
            thousands(calls),
            if failed > 0 {
                format!(", {failed} could not be replayed")
            } else {
                String::new()
            }
        )?;
        for a in &s.subagents {
            writeln!(
                out,
                "    {} at call {}: {} calls, peak {} tokens, {} compactions{}{}",
                escape(&a.agent_id),
                a.at_parent_call,
                a.calls,
                thousands(a.peak_prompt_tokens),
                a.compactions,
                a.label
                    .as_ref()
                    .map(|l| format!(" ({})", escape(l)))
                    .unwrap_or_default(),
                a.error
                    .as_ref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            )?;
        }
    }
    writeln!(
        out,
        "  truncations    {} (ingest caps {}, tool-loop guard {}, session passes {})",
        s.truncations, s.ingest_caps, s.tool_loop_truncations, s.truncation_passes
    )?;
    writeln!(
        out,
        "  pruning        {} prunes, {} characters",
        s.prunes,
        thousands(s.pruned_chars)
    )?;
    writeln!(
        out,
        "  budget         {} prompt tokens ({:.1}% of the window); {} compactions triggered by it \
         (nothing refused)",
        thousands(s.budget_tokens),
        if s.window > 0 {
            s.budget_tokens as f64 * 100.0 / s.window as f64
        } else {
            0.0
        },
        s.budget_triggers
    )?;
    writeln!(
        out,
        "  overflows      {}, recoveries {}, errors {}",
        s.overflows, s.recoveries, s.errors
    )?;
    let pct_saved = if s.tokens_if_everything > 0 {
        s.tokens_saved as f64 * 100.0 / s.tokens_if_everything as f64
    } else {
        0.0
    };
    writeln!(
        out,
        "  tokens saved   {} of {} ({pct_saved:.1}%) against sending everything; {} net of \
         what compaction read and wrote ({} + {})",
        thousands(s.tokens_saved),
        thousands(s.tokens_if_everything),
        if s.net_tokens_saved < 0 {
            format!("-{}", thousands(s.net_tokens_saved.unsigned_abs()))
        } else {
            thousands(s.net_tokens_saved.unsigned_abs())
        },
        thousands(s.compaction_input_tokens),
        thousands(s.compaction_output_tokens)
    )?;
    if let Some(cost) = &s.cost {
        writeln!(
            out,
            "  cost           ${:.2} (chat input ${:.2}, compaction ${:.2}) at the --prices table",
            cost.total_usd, cost.chat_input_usd, cost.compaction_usd
        )?;
    }
    let p = &s.per_100_calls;
    writeln!(
        out,
        "  per 100 calls  {} input tokens, {} compaction tokens, {:.1} cache breaks, {:.1} \
         compactions, {:.1} truncations, {:.1} prunes",
        thousands(p.input_tokens.round() as u64),
        thousands((p.compaction_input_tokens + p.compaction_output_tokens).round() as u64),
        p.cache_breaks,
        p.compactions,
        p.truncations,
        p.prunes
    )?;
    writeln!(
        out,
        "  compaction     {} waited on the request path ({} at most in one call); {} of {} \
         compactions swapped in a summary prepared ahead of need ({} waited), {} prepared in {} \
         off the path",
        human_ms(s.compaction_ms_on_path as f64),
        human_ms(s.compaction_ms_max_per_call as f64),
        s.compactions_prepared,
        s.compactions,
        human_ms(s.compaction_ms_prepared as f64),
        s.preparations,
        human_ms(s.preparation_ms as f64),
    )?;
    if s.memory_flushes > 0 {
        writeln!(
            out,
            "  memory         {} flush(es) before compactions wrote {} to the replay's scratch \
             memory notes",
            s.memory_flushes,
            human_bytes(s.memory_flush_bytes)
        )?;
    }
    let t = &s.timings;
    writeln!(
        out,
        "  time           {} (load {}, run {}, output {}){}",
        human_ms(t.total_ms),
        human_ms(t.load_ms),
        human_ms(t.run_ms),
        human_ms(t.output_ms),
        s.peak_rss_bytes
            .map(|b| format!("; peak memory {}", human_bytes(b)))
            .unwrap_or_default()
    )?;
    if s.guard_warnings > 0 {
        writeln!(
            out,
            "  note: the window guard warned {} time(s): {} tokens is below its warning \
             threshold",
            s.guard_warnings,
            thousands(s.window)
        )?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(human_ms(12.4), "12 ms");
        assert_eq!(human_ms(1500.0), "1.50 s");
    }

    #[test]
    fn a_row_shows_size_share_and_layers() {
        let row = Row {
            turn: 7,
            user_turn: 3,
            prompt_tokens: Some(12_345),
            window: 32_000,
            pct_window: Some(38.578),
            requests: 2,
            tags: vec!["cap".into(), "overflow".into(), "compact".into()],
            ..Row::default()
        };
        assert_eq!(
            format_row(&row),
            "    7     3    12,345   38.6%    2  cap overflow compact"
        );
    }
}
