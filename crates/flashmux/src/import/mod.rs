//! Importers of other simulators' configurations into flashmux scenario files (TOML text that
//! [`crate::config::Scenario::from_toml`] loads). This file owns what every importer shares: the
//! error type (file, line, element, what was expected), the imported scenarios and the warnings
//! about what was approximated. Each simulator has its own module: [`mqsim`].
//!
//! An importer maps each of the other simulator's parameters, approximates it (the generated file
//! says so in a `# approximated: ...` comment above the key, and a warning names the parameter's
//! line), or refuses it with an error where running anyway would mislead.

pub mod mqsim;

/// An input the importer cannot turn into a faithful scenario: always the user's to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}{}: {element}: {message}", line.map_or(String::new(), |l| format!(":{l}")))]
pub struct ImportError {
    /// The input file as named on the command line.
    pub file: String,
    /// The line of the element at fault, when the file has it.
    pub line: Option<u32>,
    /// The element (or the parameter) at fault.
    pub element: String,
    /// What is wrong and what was expected.
    pub message: String,
}

/// One generated scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedScenario {
    /// The scenario's name (also its `name = ...` key).
    pub name: String,
    /// The TOML text.
    pub toml: String,
}

/// What an import produced: one scenario per input scenario, and the warnings (each
/// `file:line: element: ...`, once, in the order found).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Imported {
    pub scenarios: Vec<ImportedScenario>,
    pub warnings: Vec<String>,
}
