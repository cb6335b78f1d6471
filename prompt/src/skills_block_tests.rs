use std::path::PathBuf;

use super::*;
use crate::skills::{SkillLimits, SkillSource};

fn skill(name: &str, description: &str) -> Skill {
    Skill {
        name: name.to_string(),
        description: description.to_string(),
        location: PathBuf::from(format!("/home/sam/ws/skills/{name}/SKILL.md")),
        source: SkillSource::Workspace,
        model_invocable: true,
    }
}

fn catalog(skills: Vec<Skill>, limits: SkillLimits) -> SkillCatalog {
    SkillCatalog::from_skills(skills, limits, Some(PathBuf::from("/home/sam")))
}

#[test]
fn the_full_format_escapes_values_and_shows_home_as_tilde() {
    let block = catalog(
        vec![skill("a&b", "Use for <charts> \"now\"")],
        SkillLimits::default(),
    )
    .render()
    .unwrap();
    assert!(!block.compact && !block.truncated());
    assert!(block.text.contains("    <name>a&amp;b</name>"));
    assert!(
        block
            .text
            .contains("    <description>Use for &lt;charts&gt; &quot;now&quot;</description>")
    );
    assert!(
        block
            .text
            .contains("<location>~/ws/skills/a&amp;b/SKILL.md</location>")
    );
    assert!(block.text.ends_with("</available_skills>"));
    assert!(!block.text.contains("⚠️"));
}

#[test]
fn no_visible_skill_renders_nothing() {
    let mut hidden = skill("h", "d");
    hidden.model_invocable = false;
    assert_eq!(catalog(vec![hidden], SkillLimits::default()).render(), None);
    assert_eq!(catalog(vec![], SkillLimits::default()).render(), None);
}

#[test]
fn over_budget_the_descriptions_go_first() {
    let skills: Vec<Skill> = (0..20)
        .map(|i| skill(&format!("s{i:02}"), &"long description ".repeat(20)))
        .collect();
    let limits = SkillLimits {
        prompt_chars: 3_000,
        ..SkillLimits::default()
    };
    let block = catalog(skills, limits).render().unwrap();
    assert!(block.compact);
    assert!(!block.truncated());
    assert_eq!(block.listed, 20);
    assert!(!block.text.contains("<description>"));
    assert!(block.text.starts_with("⚠️ Skills listed in compact format"));
}

#[test]
fn still_over_budget_the_longest_prefix_that_fits_is_listed_with_a_note() {
    let skills: Vec<Skill> = (0..100).map(|i| skill(&format!("s{i:03}"), "d")).collect();
    let limits = SkillLimits {
        prompt_chars: 2_000,
        ..SkillLimits::default()
    };
    let block = catalog(skills, limits).render().unwrap();
    assert!(block.compact && block.truncated());
    let (first_line, list) = block.text.split_once('\n').unwrap();
    assert_eq!(
        first_line,
        format!(
            "⚠️ Skills truncated: included {} of 100 (compact format, descriptions omitted). \
             Shorten skill descriptions or remove skills you do not use to list them all.",
            block.listed
        )
    );
    assert!(units(list) <= 2_000 - 150);
    // One more would not have fitted.
    let one_more: Vec<Skill> = (0..=block.listed)
        .map(|i| skill(&format!("s{i:03}"), "d"))
        .collect();
    let refs: Vec<&Skill> = one_more.iter().collect();
    assert!(units(&format_block(&refs, true, Some(Path::new("/home/sam")))) > 2_000 - 150);
}

#[test]
fn at_most_150_skills_are_listed() {
    let skills: Vec<Skill> = (0..160).map(|i| skill(&format!("s{i:03}"), "d")).collect();
    let block = catalog(skills, SkillLimits::default()).render().unwrap();
    assert_eq!((block.listed, block.total), (150, 160));
    assert!(
        block
            .text
            .starts_with("⚠️ Skills truncated: included 150 of 160. ")
    );
}
