//! A grid's `where` filters: conditions on a point's axis values that keep it in the
//! sweep, e.g. `size <= 64MiB or collective == "allreduce"`, `topo contains "over=1:1"`,
//! `channels in [1, 8]`. Written as a tiny expression language (comparisons joined by
//! `and`, `or`, `not` and parentheses) so a grid says which corners of its product it
//! skips; the points keep their numbers in the full product.
//!
//! Values compare as numbers when both sides read as one (`64MiB`, `400GB/s`, `5us`, `8`),
//! otherwise as text (only `==`, `!=`, `contains`, `in`).

use anyhow::{bail, Result};

/// The longest filter text read.
pub const MAX_FILTER_CHARS: usize = 4096;
/// The deepest nesting of parentheses and `not`.
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare { axis: String, op: Op, values: Vec<String> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Contains,
    In,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Contains => "contains",
            Op::In => "in",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Op(Op),
    Open,
    Close,
    OpenList,
    CloseList,
    Comma,
}

fn tokens(text: &str) -> Result<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' | '[' | ']' | ',' => {
                chars.next();
                out.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    '[' => Token::OpenList,
                    ']' => Token::CloseList,
                    _ => Token::Comma,
                });
            }
            '"' | '\'' => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(x) => s.push(x),
                        None => bail!("an unclosed quote {c}"),
                    }
                }
                out.push(Token::Quoted(s));
            }
            '=' | '!' | '<' | '>' => {
                chars.next();
                let eq = chars.peek() == Some(&'=');
                if eq {
                    chars.next();
                }
                out.push(Token::Op(match (c, eq) {
                    ('=', true) => Op::Eq,
                    ('!', true) => Op::Ne,
                    ('<', true) => Op::Le,
                    ('>', true) => Op::Ge,
                    ('<', false) => Op::Lt,
                    ('>', false) => Op::Gt,
                    _ => bail!("{c} alone is not a comparison (==, !=, <, <=, >, >=)"),
                }));
            }
            _ => {
                let mut s = String::new();
                while let Some(&x) = chars.peek() {
                    if x.is_whitespace() || "()[],=!<>\"'".contains(x) {
                        break;
                    }
                    s.push(x);
                    chars.next();
                }
                out.push(match s.as_str() {
                    "contains" => Token::Op(Op::Contains),
                    "in" => Token::Op(Op::In),
                    _ => Token::Word(s),
                });
            }
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w == word)
    }

    fn or(&mut self, depth: usize) -> Result<Expr> {
        let mut left = self.and(depth)?;
        while self.keyword("or") {
            self.at += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and(depth)?));
        }
        Ok(left)
    }

    fn and(&mut self, depth: usize) -> Result<Expr> {
        let mut left = self.not(depth)?;
        while self.keyword("and") {
            self.at += 1;
            left = Expr::And(Box::new(left), Box::new(self.not(depth)?));
        }
        Ok(left)
    }

    fn not(&mut self, depth: usize) -> Result<Expr> {
        if depth > MAX_DEPTH {
            bail!("nested more than {MAX_DEPTH} deep");
        }
        if self.keyword("not") {
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.not(depth + 1)?)));
        }
        if self.peek() == Some(&Token::Open) {
            self.at += 1;
            let e = self.or(depth + 1)?;
            if self.next() != Some(Token::Close) {
                bail!("a ( without its )");
            }
            return Ok(e);
        }
        self.compare()
    }

    fn value(&mut self) -> Result<String> {
        match self.next() {
            Some(Token::Word(w) | Token::Quoted(w)) => Ok(w),
            other => bail!("expected a value, got {}", describe(other.as_ref())),
        }
    }

    fn compare(&mut self) -> Result<Expr> {
        let axis = match self.next() {
            Some(Token::Word(w)) if !["and", "or", "not"].contains(&w.as_str()) => w,
            other => bail!("expected an axis name, got {}", describe(other.as_ref())),
        };
        let op = match self.next() {
            Some(Token::Op(op)) => op,
            other => {
                bail!("after {axis}: expected ==, !=, <, <=, >, >=, contains or in, got {}", describe(other.as_ref()))
            }
        };
        let values = if op == Op::In {
            if self.next() != Some(Token::OpenList) {
                bail!("{axis} in: give a list, [a, b]");
            }
            let mut values = vec![self.value()?];
            loop {
                match self.next() {
                    Some(Token::Comma) => values.push(self.value()?),
                    Some(Token::CloseList) => break,
                    other => bail!("in a list: expected , or ], got {}", describe(other.as_ref())),
                }
            }
            values
        } else {
            vec![self.value()?]
        };
        Ok(Expr::Compare { axis, op, values })
    }
}

fn describe(t: Option<&Token>) -> String {
    match t {
        None => "the end".into(),
        Some(Token::Word(w)) => format!("{w:?}"),
        Some(Token::Quoted(w)) => format!("\"{w}\""),
        Some(Token::Op(op)) => op.text().into(),
        Some(Token::Open) => "(".into(),
        Some(Token::Close) => ")".into(),
        Some(Token::OpenList) => "[".into(),
        Some(Token::CloseList) => "]".into(),
        Some(Token::Comma) => ",".into(),
    }
}

/// A filter's text parsed, its axis names checked against `axes`.
pub fn parse(text: &str, axes: &[&str]) -> Result<Expr> {
    if text.chars().count() > MAX_FILTER_CHARS {
        bail!("longer than {MAX_FILTER_CHARS} characters");
    }
    let mut p = Parser { tokens: tokens(text)?, at: 0 };
    if p.tokens.is_empty() {
        bail!("empty");
    }
    let e = p.or(0)?;
    if let Some(t) = p.peek() {
        bail!("unexpected {} (join conditions with and / or)", describe(Some(t)));
    }
    check_axes(&e, axes)?;
    Ok(e)
}

fn check_axes(e: &Expr, axes: &[&str]) -> Result<()> {
    match e {
        Expr::And(a, b) | Expr::Or(a, b) => check_axes(a, axes).and_then(|_| check_axes(b, axes)),
        Expr::Not(a) => check_axes(a, axes),
        Expr::Compare { axis, .. } if !axes.contains(&axis.as_str()) => {
            bail!("{axis} is not an axis of the grid (axes: {})", axes.join(", "))
        }
        Expr::Compare { .. } => Ok(()),
    }
}

/// How many comparisons `e` makes at most (what evaluating it over a grid costs).
pub fn comparisons(e: &Expr) -> u64 {
    match e {
        Expr::And(a, b) | Expr::Or(a, b) => comparisons(a) + comparisons(b),
        Expr::Not(a) => comparisons(a),
        Expr::Compare { values, .. } => values.len() as u64,
    }
}

/// A value as a number, when it reads as one: a plain number, a size, a rate, a time.
fn number(text: &str) -> Option<f64> {
    use railyard_units::units::{parse_bytes, parse_bytes_per_sec, parse_secs};
    text.trim()
        .parse::<f64>()
        .ok()
        .or_else(|| parse_bytes(text).ok().map(|b| b as f64))
        .or_else(|| parse_bytes_per_sec(text).ok())
        .or_else(|| parse_secs(text).ok())
        .filter(|x| x.is_finite())
}

/// An axis value as the filter reads it.
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a point (`value` gives an axis's value as text) passes `e`.
pub fn eval(e: &Expr, value: &dyn Fn(&str) -> Option<String>) -> Result<bool> {
    Ok(match e {
        Expr::And(a, b) => eval(a, value)? && eval(b, value)?,
        Expr::Or(a, b) => eval(a, value)? || eval(b, value)?,
        Expr::Not(a) => !eval(a, value)?,
        Expr::Compare { axis, op, values } => {
            let Some(have) = value(axis) else { bail!("{axis}: not an axis of the grid") };
            let matches = |want: &str| -> Result<bool> {
                let ord = match (number(&have), number(want)) {
                    (Some(x), Some(y)) => Some(x.total_cmp(&y)),
                    _ => None,
                };
                Ok(match op {
                    Op::Eq | Op::In => ord.map_or(have == want, |o| o.is_eq()),
                    Op::Ne => ord.map_or(have != want, |o| o.is_ne()),
                    Op::Contains => have.contains(want),
                    Op::Lt | Op::Le | Op::Gt | Op::Ge => {
                        let Some(o) = ord else {
                            bail!("{axis} {} {want}: {have:?} and {want:?} are not both numbers", op.text())
                        };
                        match op {
                            Op::Lt => o.is_lt(),
                            Op::Le => o.is_le(),
                            Op::Gt => o.is_gt(),
                            _ => o.is_ge(),
                        }
                    }
                })
            };
            let mut any = false;
            for want in values {
                any |= matches(want)?;
            }
            any
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, point: &[(&str, &str)]) -> Result<bool> {
        let axes: Vec<&str> = point.iter().map(|(k, _)| *k).collect();
        let e = parse(text, &axes)?;
        eval(&e, &|a| point.iter().find(|(k, _)| *k == a).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn sizes_rates_and_text_compare_as_a_user_means() {
        let p =
            [("size", "1048576"), ("topo", "rail:servers=8,over=2:1"), ("nic", "400GB/s"), ("collective", "allreduce")];
        assert!(check("size <= 1MiB", &p).unwrap());
        assert!(!check("size < 1MiB", &p).unwrap());
        assert!(check("nic > 200GB/s and topo contains 'over=2:1'", &p).unwrap());
        assert!(check("collective == allreduce or size > 1GiB", &p).unwrap());
        assert!(check("not (collective in [broadcast, reduce])", &p).unwrap());
        assert!(check("size in [4KiB, 1MiB]", &p).unwrap());
        assert!(!check("collective != \"allreduce\"", &p).unwrap());
        // and binds tighter than or.
        assert!(check("size > 1GiB and nic < 1GB/s or collective == allreduce", &p).unwrap());
        assert!(!check("size > 1GiB and (nic < 1GB/s or collective == allreduce)", &p).unwrap());
    }

    #[test]
    fn bad_filters_say_what_is_wrong() {
        let p = [("size", "1024"), ("topo", "clos:k=8")];
        let e = |t: &str| check(t, &p).unwrap_err().to_string();
        assert!(e("nosuch == 1").contains("nosuch is not an axis of the grid (axes: size, topo)"));
        assert!(e("topo < 3").contains("are not both numbers"));
        assert!(e("size = 3").contains("= alone"));
        assert!(e("size == 3 size == 4").contains("join conditions"));
        assert!(e("(size == 3").contains("without its )"));
        assert!(e("size in 3").contains("give a list"));
        assert!(e("topo == 'x").contains("unclosed quote"));
        assert!(e(&"not ".repeat(40)).contains("nested more than"));
        assert!(e("").contains("empty"));
    }
}
