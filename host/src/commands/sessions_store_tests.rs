#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
    file
}

#[test]
fn the_flag_wins_and_must_name_a_database() {
    let options = database_options(Some("postgres://u@h:5/db"), None, None, None)
        .unwrap()
        .unwrap();
    assert_eq!(options.name(), Path::new("postgres://u@h:5/db"));
    let e = database_options(Some("/some/dir"), None, None, None).unwrap_err();
    assert!(e.to_string().contains("--sessions-dir"), "{e}");
    let e = database_options(
        Some("postgres://u@h:5/db"),
        None,
        Some(Path::new("/d")),
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("not both"), "{e}");
}

#[test]
fn the_configuration_names_the_database_unless_a_directory_is_given() {
    let file = config_file("[serve.store]\nurl = \"postgres://ops@db.internal:5433/rampart\"\n");
    let options = database_options(None, None, None, Some(file.path()))
        .unwrap()
        .unwrap();
    assert_eq!(
        options.name(),
        Path::new("postgres://ops@db.internal:5433/rampart")
    );
    assert!(
        database_options(None, None, Some(Path::new("/d")), Some(file.path()))
            .unwrap()
            .is_none()
    );
    let plain = config_file("");
    assert!(
        database_options(None, None, None, Some(plain.path()))
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_password_variable_without_a_database_is_refused() {
    let e = database_options(None, Some("PGPASS"), Some(Path::new("/d")), None).unwrap_err();
    assert!(e.to_string().contains("--password-env"), "{e}");
}

#[test]
fn a_broken_configuration_is_named_with_the_way_around_it() {
    let file = config_file("[serve.store\n");
    let e = database_options(None, None, None, Some(file.path())).unwrap_err();
    let text = format!("{e:#}");
    assert!(text.contains("--sessions-dir"), "{text}");
    assert!(text.contains(&file.path().display().to_string()), "{text}");
}
