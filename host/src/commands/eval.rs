//! `rampart eval [CORPUS…]`: the matrix of [`crate::eval`], as a table.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::config::Config;
use crate::eval::{Format, Matrix, render, run, transcripts_in};
use crate::output_file::{Inputs, OutputFile};

/// The engines compared when `--engines` is not given.
pub const DEFAULT_ENGINES: [&str; 2] = ["legacy", "window"];
/// The windows when `--windows` is not given.
pub const DEFAULT_WINDOWS: [u64; 3] = [32_000, 64_000, 128_000];
/// The corpus when none is given: the repository's examples.
pub const DEFAULT_CORPUS: &str = "examples";

/// `rampart eval [CORPUS…] [flags]`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Transcripts, or directories of them [default: examples].
    pub corpus: Vec<PathBuf>,
    /// Engines to compare, comma-separated [default: legacy,window].
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub engines: Vec<String>,
    /// Windows, comma-separated, in tokens [default: 32000,64000,128000].
    #[arg(long, value_delimiter = ',', value_name = "N")]
    pub windows: Vec<u64>,
    /// How the table is written.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the table to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs the matrix; exit 1 when a cell could not run (its row says why). `--out` is checked
/// and opened before the first cell runs, against `protect` (the configuration) and every
/// transcript of the corpus, and replaces an existing file only with `overwrite`.
pub fn eval(
    config: &Config,
    args: EvalArgs,
    protect: &Inputs,
    overwrite: bool,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let corpus = if args.corpus.is_empty() {
        vec![PathBuf::from(DEFAULT_CORPUS)]
    } else {
        args.corpus
    };
    let mut transcripts = Vec::new();
    for place in &corpus {
        if place.is_dir() {
            transcripts.extend(transcripts_in(place).with_context(|| {
                format!("cannot read the corpus directory `{}`", place.display())
            })?);
        } else if place.is_file() {
            transcripts.push(place.clone());
        } else {
            anyhow::bail!(
                "corpus `{}` is neither a file nor a directory; give transcripts or directories \
                 of them (the default is `{DEFAULT_CORPUS}`, from the repository root)",
                place.display()
            );
        }
    }
    let mut inputs = protect.clone();
    for transcript in &transcripts {
        inputs.file("a transcript of the corpus", transcript);
    }
    let out_file = match &args.out {
        Some(path) => Some(OutputFile::create("--out", path, &inputs, overwrite)?),
        None => None,
    };
    let matrix = Matrix {
        engines: if args.engines.is_empty() {
            DEFAULT_ENGINES.iter().map(|e| e.to_string()).collect()
        } else {
            args.engines
        },
        windows: if args.windows.is_empty() {
            DEFAULT_WINDOWS.to_vec()
        } else {
            args.windows
        },
        transcripts,
    };
    let cells = run(config, &matrix);
    let table = render(&cells, args.format);
    match out_file {
        Some(file) => {
            let path = file.path().to_path_buf();
            file.write_whole(table.as_bytes())?;
            writeln!(
                out,
                "wrote {} ({} cells)",
                crate::terminal::escape(&path.display().to_string()),
                cells.len()
            )?;
        }
        None => out.write_all(table.as_bytes())?,
    }
    Ok(if cells.iter().any(|c| c.failure.is_some()) {
        1
    } else {
        0
    })
}
