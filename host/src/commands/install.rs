//! `rampart completions SHELL` and `rampart man`: what a shell and `man` need to treat rampart
//! like any installed tool.
//!
//! Both are generated from [`Cli`], the definition the parser uses, by clap's own generators
//! (`clap_complete`, `clap_mangen`): a new flag is completed and documented the day it exists.

use std::io::Write;

use clap::CommandFactory;

use super::Cli;

/// Writes the completion script for `shell` to `out`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> anyhow::Result<i32> {
    use clap_complete::Generator;
    let mut command = Cli::command().bin_name("rampart");
    command.build();
    // `try_generate`: a closed pipe (`rampart completions bash | head`) is an error to return,
    // not a panic.
    shell.try_generate(&command, out)?;
    out.flush()?;
    Ok(0)
}

/// Writes the manual page to `out`: rampart's own section, then one section per command
/// (subcommands included), each with its synopsis, description and options, so one page
/// holds everything `--help` says. Hidden commands (the engine host) are left out.
pub fn man(out: &mut dyn Write) -> anyhow::Result<i32> {
    let command = Cli::command();
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    render_commands(&command, "rampart", out)?;
    man.render_version_section(out)?;
    out.flush()?;
    Ok(0)
}

/// One `.SH` section per visible command under `parent`, depth first, named by its full path
/// (`rampart sessions import`), with its synopsis, description and options as `.SS`
/// subsections.
fn render_commands(parent: &clap::Command, path: &str, out: &mut dyn Write) -> std::io::Result<()> {
    for sub in parent.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("{path} {}", sub.get_name());
        // The synopsis names the command by its bin name: give it the full path.
        let man = clap_mangen::Man::new(sub.clone().bin_name(name.clone()));
        let mut body = Vec::new();
        man.render_synopsis_section(&mut body)?;
        man.render_description_section(&mut body)?;
        man.render_options_section(&mut body)?;
        writeln!(out, ".SH \"{}\"", name.to_uppercase())?;
        for line in String::from_utf8_lossy(&body).lines() {
            match line.strip_prefix(".SH ") {
                Some(heading) => writeln!(out, ".SS {heading}")?,
                None => writeln!(out, "{line}")?,
            }
        }
        render_commands(sub, &name, out)?;
    }
    Ok(())
}
