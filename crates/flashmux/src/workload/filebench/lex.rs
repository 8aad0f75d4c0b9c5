//! The WML lexer: text → tokens with their line numbers, as Filebench's `parser_lex.l` cuts it.
//!
//! - newlines, blanks and tabs separate tokens and nothing else (a statement may span lines);
//!   `#` starts a comment to the end of the line; a carriage return counts as a blank;
//! - a number is decimal digits with an optional `k`, `m` or `g` suffix (powers of 1,024, lower
//!   case only, as Filebench has them); `-` and digits is a negative number (`psrun -10`);
//! - `true` and `false` are booleans; `$name` is a variable reference;
//! - a word is `[/A-Za-z-][/A-Za-z0-9._:;-]*` (names, paths, keywords);
//! - `"..."` is a quoted string (a backslash takes the next character literally; `\n` is a
//!   newline), `{ } ( ) = ,` are punctuation.
//!
//! Anything else is an error naming the line and the character, never a panic.

use crate::units::shown;

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Word(String),
    Int(u64),
    NegInt(i64),
    Bool(bool),
    /// A variable reference, without the `$`.
    Var(String),
    Quoted(String),
    Open,
    Close,
    OpenParen,
    CloseParen,
    Assign,
    Comma,
}

impl Tok {
    /// How the token reads in a message.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("'{}'", shown(w)),
            Tok::Int(n) => format!("'{n}'"),
            Tok::NegInt(n) => format!("'{n}'"),
            Tok::Bool(b) => format!("'{b}'"),
            Tok::Var(v) => format!("'${}'", shown(v)),
            Tok::Quoted(q) => format!("\"{}\"", shown(q)),
            Tok::Open => "'{'".into(),
            Tok::Close => "'}'".into(),
            Tok::OpenParen => "'('".into(),
            Tok::CloseParen => "')'".into(),
            Tok::Assign => "'='".into(),
            Tok::Comma => "','".into(),
        }
    }
}

/// A token and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Token {
    pub tok: Tok,
    pub line: usize,
}

/// A lexing error: the line and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LexError {
    pub line: usize,
    pub message: String,
}

fn is_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '/' || c == '-'
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | ':' | ';' | '-')
}

/// Whether `s` lexes back as one word token (the printer quotes every other string).
pub(super) fn is_plain_word(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if is_word_start(c) && c != '-')
        && chars.all(is_word_char)
        && s != "true"
        && s != "false"
}

/// Cuts `text` into tokens.
pub(super) fn lex(text: &str) -> Result<Vec<Token>, LexError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        let start_line = line;
        let tok = match c {
            '\n' => {
                line += 1;
                i += 1;
                continue;
            }
            ' ' | '\t' | '\r' => {
                i += 1;
                continue;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '{' => Tok::Open,
            '}' => Tok::Close,
            '(' => Tok::OpenParen,
            ')' => Tok::CloseParen,
            '=' => Tok::Assign,
            ',' => Tok::Comma,
            '"' => {
                let (s, next, lines) = quoted(&chars, i + 1).ok_or_else(|| LexError {
                    line: start_line,
                    message: "unterminated quoted string (no closing '\"')".into(),
                })?;
                out.push(Token { tok: Tok::Quoted(s), line: start_line });
                line += lines;
                i = next;
                continue;
            }
            _ => {
                let (tok, end) = atom(&chars, i).map_err(|message| LexError { line, message })?;
                out.push(Token { tok, line });
                i = end;
                continue;
            }
        };
        out.push(Token { tok, line: start_line });
        i += 1;
    }
    Ok(out)
}

/// A variable, number or word starting at `i`, and the index after it.
fn atom(chars: &[char], i: usize) -> Result<(Tok, usize), String> {
    let c = chars[i];
    if c == '$' {
        let end = scan(chars, i + 1, |c| c.is_ascii_alphanumeric() || c == '_');
        let name: String = chars[i + 1..end].iter().collect();
        if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Err("'$' must be followed by a variable name".into());
        }
        return Ok((Tok::Var(name), end));
    }
    if c.is_ascii_digit() || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
        let end = scan(chars, i + 1, |c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
        let word: String = chars[i..end].iter().collect();
        return Ok((number(&word)?, end));
    }
    if is_word_start(c) {
        let end = scan(chars, i + 1, is_word_char);
        let word: String = chars[i..end].iter().collect();
        let tok = match word.as_str() {
            "true" => Tok::Bool(true),
            "false" => Tok::Bool(false),
            _ => Tok::Word(word),
        };
        return Ok((tok, end));
    }
    Err(format!("unexpected character '{}'", c.escape_debug()))
}

fn scan(chars: &[char], mut i: usize, keep: impl Fn(char) -> bool) -> usize {
    while i < chars.len() && keep(chars[i]) {
        i += 1;
    }
    i
}

/// The body of a quoted string starting at `i` (after the opening quote): its text, the index
/// after the closing quote, and the newlines it spans. `None` if it never closes.
fn quoted(chars: &[char], mut i: usize) -> Option<(String, usize, usize)> {
    let (mut s, mut lines) = (String::new(), 0);
    while i < chars.len() {
        match chars[i] {
            '"' => return Some((s, i + 1, lines)),
            '\\' if i + 1 < chars.len() => {
                let next = chars[i + 1];
                lines += usize::from(next == '\n');
                s.push(if next == 'n' { '\n' } else { next });
                i += 2;
                continue;
            }
            c => {
                lines += usize::from(c == '\n');
                s.push(c);
            }
        }
        i += 1;
    }
    None
}

/// A number token: digits with an optional `k`/`m`/`g` suffix, or a negative integer.
fn number(word: &str) -> Result<Tok, String> {
    let bad = || {
        format!(
            "bad size or number '{}': expected digits with an optional k, m or g suffix (16k, 1m, 1g, 4096)",
            shown(word)
        )
    };
    if let Some(digits) = word.strip_prefix('-') {
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: i64 = word.parse().map_err(|_| format!("number '{word}' is too large"))?;
        return Ok(Tok::NegInt(n));
    }
    let (digits, unit) = match word.as_bytes()[word.len() - 1] {
        b'k' => (&word[..word.len() - 1], 1u64 << 10),
        b'm' => (&word[..word.len() - 1], 1 << 20),
        b'g' => (&word[..word.len() - 1], 1 << 30),
        _ => (word, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let too_large = || format!("number '{}' is too large: the largest is {}", shown(word), u64::MAX);
    let n: u64 = digits.parse().map_err(|_| too_large())?;
    n.checked_mul(unit).map(Tok::Int).ok_or_else(too_large)
}
