//! The integer expression language of annotations: constraints, launch geometry, buffer
//! lengths and costs are expressions over tunable parameters and problem sizes.
//!
//! The syntax is the subset of Rust integer expressions that reads naturally in an annotation:
//! literals (`1_024`, `0x40`, `1u64`), variables, `+ - * / %`, `<< >> & | ^`, comparisons,
//! `&& || !`, parentheses and the functions `min(a, b)`, `max(a, b)`, `ceil_div(a, b)`,
//! `round_up(a, b)` and `log2(a)`. Values are `i64`; comparisons and logic yield 0 or 1.
//! Arithmetic is checked: overflow, division by zero and negative shifts are errors, never
//! panics or wrapped results.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A parsed expression together with its canonical text.
#[derive(Clone, PartialEq, Eq)]
pub struct Expr {
    node: Node,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Lit(i64),
    Var(String),
    Unary(UnOp, Box<Node>),
    Binary(BinOp, Box<Node>, Box<Node>),
    Call(Func, Vec<Node>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    BitOr,
    BitXor,
    BitAnd,
    Shl,
    Shr,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Func {
    Min,
    Max,
    CeilDiv,
    RoundUp,
    Log2,
}

impl Func {
    fn from_name(name: &str) -> Option<Func> {
        Some(match name {
            "min" => Func::Min,
            "max" => Func::Max,
            "ceil_div" => Func::CeilDiv,
            "round_up" => Func::RoundUp,
            "log2" => Func::Log2,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Func::Min => "min",
            Func::Max => "max",
            Func::CeilDiv => "ceil_div",
            Func::RoundUp => "round_up",
            Func::Log2 => "log2",
        }
    }
    fn arity(self) -> usize {
        match self {
            Func::Log2 => 1,
            _ => 2,
        }
    }
}

impl BinOp {
    /// Binding power: higher binds tighter (Rust's precedence).
    fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 3,
            BinOp::BitOr => 4,
            BinOp::BitXor => 5,
            BinOp::BitAnd => 6,
            BinOp::Shl | BinOp::Shr => 7,
            BinOp::Add | BinOp::Sub => 8,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 9,
        }
    }
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::BitAnd => "&",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }
    fn is_comparison(self) -> bool {
        self.precedence() == 3
    }
}

/// Why an expression could not be parsed; `offset` is a byte offset into the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at offset {offset} of `{text}`)")]
pub struct ParseError {
    pub message: String,
    pub offset: usize,
    pub text: String,
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error("unknown variable `{0}`")]
    UnknownVariable(String),
    #[error("arithmetic overflow in `{0}`")]
    Overflow(String),
    #[error("division by zero in `{0}`")]
    DivisionByZero(String),
    #[error("invalid argument in `{0}`")]
    Domain(String),
}

/// Variable bindings for evaluation (parameters and sizes).
pub type Env = BTreeMap<String, i64>;

impl Expr {
    /// Parses an expression from text.
    pub fn parse(text: &str) -> Result<Expr, ParseError> {
        let tokens = lex(text)?;
        let mut parser = Parser {
            text,
            tokens,
            pos: 0,
        };
        let node = parser.expr(0)?;
        if let Some(tok) = parser.tokens.get(parser.pos) {
            return Err(parser.error_at(tok.offset, format!("unexpected `{}`", tok.kind)));
        }
        if tree_depth(&node) > MAX_TREE_DEPTH {
            return Err(parser.error_at(
                0,
                format!("expression nested too deeply (more than {MAX_TREE_DEPTH} levels)"),
            ));
        }
        Ok(Expr { node })
    }

    /// A literal expression.
    pub fn literal(value: i64) -> Expr {
        Expr {
            node: Node::Lit(value),
        }
    }

    /// Evaluates with the given bindings.
    pub fn eval(&self, env: &Env) -> Result<i64, EvalError> {
        eval(&self.node, env, self)
    }

    /// Evaluates a constraint: non-zero means it holds.
    pub fn holds(&self, env: &Env) -> Result<bool, EvalError> {
        Ok(self.eval(env)? != 0)
    }

    /// Whether any variable the expression reads satisfies `pred` (without allocating).
    pub fn reads_any(&self, pred: impl Fn(&str) -> bool) -> bool {
        fn walk(node: &Node, pred: &dyn Fn(&str) -> bool) -> bool {
            match node {
                Node::Lit(_) => false,
                Node::Var(v) => pred(v),
                Node::Unary(_, a) => walk(a, pred),
                Node::Binary(_, a, b) => walk(a, pred) || walk(b, pred),
                Node::Call(_, args) => args.iter().any(|a| walk(a, pred)),
            }
        }
        walk(&self.node, &pred)
    }

    /// The variables the expression reads, sorted.
    pub fn variables(&self) -> BTreeSet<String> {
        fn walk(node: &Node, out: &mut BTreeSet<String>) {
            match node {
                Node::Lit(_) => {}
                Node::Var(v) => {
                    out.insert(v.clone());
                }
                Node::Unary(_, a) => walk(a, out),
                Node::Binary(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Node::Call(_, args) => args.iter().for_each(|a| walk(a, out)),
            }
        }
        let mut out = BTreeSet::new();
        walk(&self.node, &mut out);
        out
    }
}

/// Depth of a tree, without recursion (the tree may be arbitrarily deep here).
fn tree_depth(root: &Node) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match node {
            Node::Lit(_) | Node::Var(_) => {}
            Node::Unary(_, a) => stack.push((a, depth + 1)),
            Node::Binary(_, a, b) => {
                stack.push((a, depth + 1));
                stack.push((b, depth + 1));
            }
            Node::Call(_, args) => stack.extend(args.iter().map(|a| (a, depth + 1))),
        }
    }
    deepest
}

fn eval(node: &Node, env: &Env, whole: &Expr) -> Result<i64, EvalError> {
    let overflow = || EvalError::Overflow(whole.to_string());
    Ok(match node {
        Node::Lit(v) => *v,
        Node::Var(name) => *env
            .get(name)
            .ok_or_else(|| EvalError::UnknownVariable(name.clone()))?,
        Node::Unary(UnOp::Neg, a) => eval(a, env, whole)?.checked_neg().ok_or_else(overflow)?,
        Node::Unary(UnOp::Not, a) => (eval(a, env, whole)? == 0) as i64,
        Node::Binary(BinOp::And, a, b) => {
            (eval(a, env, whole)? != 0 && eval(b, env, whole)? != 0) as i64
        }
        Node::Binary(BinOp::Or, a, b) => {
            (eval(a, env, whole)? != 0 || eval(b, env, whole)? != 0) as i64
        }
        Node::Binary(op, a, b) => {
            let (x, y) = (eval(a, env, whole)?, eval(b, env, whole)?);
            let div0 = || EvalError::DivisionByZero(whole.to_string());
            match op {
                BinOp::Eq => (x == y) as i64,
                BinOp::Ne => (x != y) as i64,
                BinOp::Lt => (x < y) as i64,
                BinOp::Le => (x <= y) as i64,
                BinOp::Gt => (x > y) as i64,
                BinOp::Ge => (x >= y) as i64,
                BinOp::BitOr => x | y,
                BinOp::BitXor => x ^ y,
                BinOp::BitAnd => x & y,
                BinOp::Shl | BinOp::Shr => {
                    let shift = u32::try_from(y)
                        .ok()
                        .filter(|s| *s < 64)
                        .ok_or_else(|| EvalError::Domain(whole.to_string()))?;
                    if *op == BinOp::Shl {
                        let r = x.checked_shl(shift).ok_or_else(overflow)?;
                        if r >> shift != x {
                            return Err(overflow());
                        }
                        r
                    } else {
                        x >> shift
                    }
                }
                BinOp::Add => x.checked_add(y).ok_or_else(overflow)?,
                BinOp::Sub => x.checked_sub(y).ok_or_else(overflow)?,
                BinOp::Mul => x.checked_mul(y).ok_or_else(overflow)?,
                BinOp::Div if y == 0 => return Err(div0()),
                BinOp::Div => x.checked_div(y).ok_or_else(overflow)?,
                BinOp::Rem if y == 0 => return Err(div0()),
                BinOp::Rem => x.checked_rem(y).ok_or_else(overflow)?,
                // Handled above, where they short-circuit.
                BinOp::And | BinOp::Or => {
                    (x != 0 && y != 0 || *op == BinOp::Or && (x != 0 || y != 0)) as i64
                }
            }
        }
        Node::Call(func, args) => {
            let vals = args
                .iter()
                .map(|a| eval(a, env, whole))
                .collect::<Result<Vec<_>, _>>()?;
            match func {
                Func::Min => vals[0].min(vals[1]),
                Func::Max => vals[0].max(vals[1]),
                Func::CeilDiv | Func::RoundUp => {
                    let (a, b) = (vals[0], vals[1]);
                    if b <= 0 || a < 0 {
                        return Err(EvalError::Domain(whole.to_string()));
                    }
                    let q = a / b + (a % b != 0) as i64;
                    if *func == Func::CeilDiv {
                        q
                    } else {
                        q.checked_mul(b).ok_or_else(overflow)?
                    }
                }
                Func::Log2 => {
                    if vals[0] <= 0 {
                        return Err(EvalError::Domain(whole.to_string()));
                    }
                    63 - vals[0].leading_zeros() as i64
                }
            }
        }
    })
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_node(&self.node, f, 0)
    }
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Expr({self})")
    }
}

fn write_node(node: &Node, f: &mut fmt::Formatter<'_>, parent_prec: u8) -> fmt::Result {
    match node {
        Node::Lit(v) if *v < 0 => write!(f, "({v})"),
        Node::Lit(v) => write!(f, "{v}"),
        Node::Var(v) => f.write_str(v),
        // `-(5)` keeps its parentheses: `-5` would read back as the literal -5.
        Node::Unary(UnOp::Neg, a) if matches!(**a, Node::Lit(v) if v >= 0) => {
            write!(f, "-({a})", a = DisplayNode(a))
        }
        Node::Unary(op, a) => {
            f.write_str(if *op == UnOp::Neg { "-" } else { "!" })?;
            write_node(a, f, 10)
        }
        Node::Binary(op, a, b) => {
            let prec = op.precedence();
            let paren = prec <= parent_prec;
            if paren {
                f.write_str("(")?;
            }
            // Left-associative: the left operand may share our precedence, except for
            // comparisons, which do not chain.
            write_node(a, f, if op.is_comparison() { prec } else { prec - 1 })?;
            write!(f, " {} ", op.symbol())?;
            write_node(b, f, prec)?;
            if paren {
                f.write_str(")")?;
            }
            Ok(())
        }
        Node::Call(func, args) => {
            write!(f, "{}(", func.name())?;
            for (i, a) in args.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write_node(a, f, 0)?;
            }
            f.write_str(")")
        }
    }
}

struct DisplayNode<'a>(&'a Node);

impl fmt::Display for DisplayNode<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_node(self.0, f, 0)
    }
}

impl Serialize for Expr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Expr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Expr, D::Error> {
        let text = String::deserialize(d)?;
        Expr::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for Expr {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Expr, ParseError> {
        Expr::parse(s)
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer and Pratt parser

#[derive(Debug, Clone, PartialEq, Eq)]
enum TokKind {
    /// Magnitude as written (up to 2^63, so that `-9223372036854775808` can be folded).
    Int(i128),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
}

impl fmt::Display for TokKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokKind::Int(v) => write!(f, "{v}"),
            TokKind::Ident(s) => f.write_str(s),
            TokKind::Op(s) => f.write_str(s),
            TokKind::LParen => f.write_str("("),
            TokKind::RParen => f.write_str(")"),
            TokKind::Comma => f.write_str(","),
        }
    }
}

struct Token {
    kind: TokKind,
    offset: usize,
}

const OPERATORS: [&str; 20] = [
    "||", "&&", "==", "!=", "<=", ">=", "<<", ">>", "<", ">", "|", "^", "&", "+", "-", "*", "/",
    "%", "!", "=",
];

const INT_SUFFIXES: [&str; 12] = [
    "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
];

fn lex(text: &str) -> Result<Vec<Token>, ParseError> {
    let err = |offset: usize, message: String| ParseError {
        message,
        offset,
        text: text.to_string(),
    };
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let raw = &text[start..i];
            let mut digits: String = raw.chars().filter(|c| *c != '_').collect();
            for suffix in INT_SUFFIXES {
                if let Some(stripped) = digits.strip_suffix(suffix) {
                    digits = stripped.to_string();
                    break;
                }
            }
            let value = if let Some(hex) = digits.strip_prefix("0x") {
                i128::from_str_radix(hex, 16)
            } else if let Some(bin) = digits.strip_prefix("0b") {
                i128::from_str_radix(bin, 2)
            } else {
                digits.parse::<i128>()
            }
            .ok()
            .filter(|v| *v <= i64::MAX as i128 + 1)
            .ok_or_else(|| err(start, format!("invalid integer literal `{raw}`")))?;
            tokens.push(Token {
                kind: TokKind::Int(value),
                offset: start,
            });
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            tokens.push(Token {
                kind: TokKind::Ident(text[start..i].to_string()),
                offset: start,
            });
        } else if c == b'(' {
            i += 1;
            tokens.push(Token {
                kind: TokKind::LParen,
                offset: start,
            });
        } else if c == b')' {
            i += 1;
            tokens.push(Token {
                kind: TokKind::RParen,
                offset: start,
            });
        } else if c == b',' {
            i += 1;
            tokens.push(Token {
                kind: TokKind::Comma,
                offset: start,
            });
        } else if let Some(op) = OPERATORS.iter().find(|op| text[i..].starts_with(**op)) {
            if *op == "=" {
                return Err(err(
                    start,
                    "`=` is not an operator here; write `==` to compare".into(),
                ));
            }
            i += op.len();
            tokens.push(Token {
                kind: TokKind::Op(op),
                offset: start,
            });
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(err(start, format!("unexpected character `{ch}`")));
        }
    }
    Ok(tokens)
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token>,
    pos: usize,
}

/// Expressions deeper than this (as trees) are refused: evaluation and printing recurse, and
/// hostile input must not overflow the stack.
const MAX_TREE_DEPTH: usize = 64;
/// Parser recursion limit (parentheses and unary operators). Printing a tree of at most
/// `MAX_TREE_DEPTH` adds at most two levels per node, so everything accepted prints to text that
/// parses again.
const MAX_DEPTH: usize = 3 * MAX_TREE_DEPTH + 8;

impl Parser<'_> {
    fn error_at(&self, offset: usize, message: String) -> ParseError {
        ParseError {
            message,
            offset,
            text: self.text.to_string(),
        }
    }

    fn end_error(&self, what: &str) -> ParseError {
        self.error_at(self.text.len(), format!("expected {what}, found the end"))
    }

    fn peek(&self) -> Option<&TokKind> {
        self.tokens.get(self.pos).map(|t| &t.kind)
    }

    fn binop(&self) -> Option<BinOp> {
        Some(match self.peek()? {
            TokKind::Op(op) => match *op {
                "||" => BinOp::Or,
                "&&" => BinOp::And,
                "==" => BinOp::Eq,
                "!=" => BinOp::Ne,
                "<" => BinOp::Lt,
                "<=" => BinOp::Le,
                ">" => BinOp::Gt,
                ">=" => BinOp::Ge,
                "|" => BinOp::BitOr,
                "^" => BinOp::BitXor,
                "&" => BinOp::BitAnd,
                "<<" => BinOp::Shl,
                ">>" => BinOp::Shr,
                "+" => BinOp::Add,
                "-" => BinOp::Sub,
                "*" => BinOp::Mul,
                "/" => BinOp::Div,
                "%" => BinOp::Rem,
                _ => return None,
            },
            _ => return None,
        })
    }

    fn expr(&mut self, depth: usize) -> Result<Node, ParseError> {
        self.expr_bp(0, depth)
    }

    fn expr_bp(&mut self, min_prec: u8, depth: usize) -> Result<Node, ParseError> {
        if depth > MAX_DEPTH {
            let offset = self
                .tokens
                .get(self.pos)
                .map_or(self.text.len(), |t| t.offset);
            return Err(self.error_at(offset, "expression nested too deeply".into()));
        }
        let mut lhs = self.unary(depth)?;
        let mut chained = 0;
        while let Some(op) = self.binop() {
            let prec = op.precedence();
            if prec <= min_prec {
                break;
            }
            // Each operator in a left-associative chain deepens the tree by one: refuse long
            // chains here, before a tree too deep to drop safely is built.
            chained += 1;
            if chained > MAX_TREE_DEPTH {
                let offset = self.tokens[self.pos].offset;
                return Err(self.error_at(
                    offset,
                    format!("expression nested too deeply (more than {MAX_TREE_DEPTH} levels)"),
                ));
            }
            self.pos += 1;
            let rhs = self.expr_bp(prec, depth + 1)?;
            if op.is_comparison() {
                if let Some(next) = self.binop().filter(|n| n.is_comparison()) {
                    let at = self.tokens[self.pos].offset;
                    return Err(self.error_at(
                        at,
                        format!("comparisons cannot be chained (`{}` after `{}`); use parentheses and `&&`", next.symbol(), op.symbol()),
                    ));
                }
            }
            lhs = Node::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self, depth: usize) -> Result<Node, ParseError> {
        match self.peek() {
            Some(TokKind::Op("-")) => {
                self.pos += 1;
                // Fold `-literal` so that i64::MIN is expressible and displays round-trip.
                if let Some(TokKind::Int(v)) = self.peek().cloned() {
                    let offset = self.tokens[self.pos].offset;
                    self.pos += 1;
                    // The lexer bounds v by 2^63, so -v always fits (i64::MIN included).
                    let value = i64::try_from(-v).map_err(|_| {
                        self.error_at(offset, format!("integer literal -{v} is out of range"))
                    })?;
                    return Ok(Node::Lit(value));
                }
                Ok(Node::Unary(UnOp::Neg, Box::new(self.unary_nested(depth)?)))
            }
            Some(TokKind::Op("!")) => {
                self.pos += 1;
                Ok(Node::Unary(UnOp::Not, Box::new(self.unary_nested(depth)?)))
            }
            _ => self.primary(depth),
        }
    }

    fn unary_nested(&mut self, depth: usize) -> Result<Node, ParseError> {
        if depth > MAX_DEPTH {
            let offset = self
                .tokens
                .get(self.pos)
                .map_or(self.text.len(), |t| t.offset);
            return Err(self.error_at(offset, "expression nested too deeply".into()));
        }
        self.unary(depth + 1)
    }

    fn primary(&mut self, depth: usize) -> Result<Node, ParseError> {
        let Some(tok) = self.tokens.get(self.pos) else {
            return Err(self.end_error("a value"));
        };
        let offset = tok.offset;
        match tok.kind.clone() {
            TokKind::Int(v) => {
                self.pos += 1;
                let v = i64::try_from(v).map_err(|_| {
                    self.error_at(
                        offset,
                        format!("integer literal {v} is out of range (only -{v} is)"),
                    )
                })?;
                Ok(Node::Lit(v))
            }
            TokKind::Ident(name) => {
                self.pos += 1;
                if self.peek() != Some(&TokKind::LParen) {
                    return Ok(Node::Var(name));
                }
                let func = Func::from_name(&name).ok_or_else(|| {
                    self.error_at(
                        offset,
                        format!(
                            "unknown function `{name}` (known: min, max, ceil_div, round_up, log2)"
                        ),
                    )
                })?;
                self.pos += 1;
                let mut args = Vec::new();
                if self.peek() != Some(&TokKind::RParen) {
                    loop {
                        args.push(self.expr(depth + 1)?);
                        match self.peek() {
                            Some(TokKind::Comma) => self.pos += 1,
                            _ => break,
                        }
                    }
                }
                self.expect_rparen()?;
                if args.len() != func.arity() {
                    return Err(self.error_at(
                        offset,
                        format!(
                            "`{}` takes {} argument(s), found {}",
                            func.name(),
                            func.arity(),
                            args.len()
                        ),
                    ));
                }
                Ok(Node::Call(func, args))
            }
            TokKind::LParen => {
                self.pos += 1;
                let inner = self.expr(depth + 1)?;
                self.expect_rparen()?;
                Ok(inner)
            }
            other => Err(self.error_at(offset, format!("expected a value, found `{other}`"))),
        }
    }

    fn expect_rparen(&mut self) -> Result<(), ParseError> {
        match self.tokens.get(self.pos) {
            Some(Token {
                kind: TokKind::RParen,
                ..
            }) => {
                self.pos += 1;
                Ok(())
            }
            Some(tok) => {
                Err(self.error_at(tok.offset, format!("expected `)`, found `{}`", tok.kind)))
            }
            None => Err(self.end_error("`)`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, i64)]) -> Env {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn ev(text: &str, pairs: &[(&str, i64)]) -> i64 {
        Expr::parse(text).unwrap().eval(&env(pairs)).unwrap()
    }

    #[test]
    fn precedence_follows_rust() {
        assert_eq!(ev("1 + 2 * 3", &[]), 7);
        assert_eq!(ev("(1 + 2) * 3", &[]), 9);
        assert_eq!(ev("1 << 4 + 1", &[]), 32);
        assert_eq!(ev("10 - 4 - 3", &[]), 3);
        assert_eq!(ev("100 / 10 / 5", &[]), 2);
        assert_eq!(
            ev(
                "n % (VEC * ITEMS) == 0",
                &[("n", 64), ("VEC", 4), ("ITEMS", 8)]
            ),
            1
        );
        assert_eq!(
            ev(
                "n % (VEC * ITEMS) == 0",
                &[("n", 60), ("VEC", 4), ("ITEMS", 8)]
            ),
            0
        );
        assert_eq!(ev("1 < 2 && 3 > 4 || 1", &[]), 1);
        assert_eq!(ev("6 & 3 | 8 ^ 1", &[]), 11);
        assert_eq!(ev("-3 * -2", &[]), 6);
        assert_eq!(ev("!0 + !5", &[]), 1);
    }

    #[test]
    fn literals_and_functions() {
        assert_eq!(ev("1_024 + 0x10 + 0b11 + 2u64", &[]), 1024 + 16 + 3 + 2);
        assert_eq!(ev("min(3, 9) + max(3, 9)", &[]), 12);
        assert_eq!(ev("ceil_div(10, 4)", &[]), 3);
        assert_eq!(ev("round_up(10, 4)", &[]), 12);
        assert_eq!(ev("log2(1024)", &[]), 10);
        assert_eq!(ev("1 << 24", &[]), 16_777_216);
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "n / (VEC * ITEMS)",
            "a - (b - c)",
            "(a - b) - c",
            "-x * 3",
            "!(a == b) && c",
            "min(a, b + 1) << 2",
            "-5 + x",
            "a % b == 0 && (c | d) > 2",
            "-(1 << 4)",
        ] {
            let e = Expr::parse(text).unwrap();
            let again = Expr::parse(&e.to_string()).unwrap();
            assert_eq!(e, again, "{text} printed as {e}");
        }
        assert_eq!(Expr::parse("(a) + ((b))").unwrap().to_string(), "a + b");
        assert_eq!(
            Expr::parse("a - (b - c)").unwrap().to_string(),
            "a - (b - c)"
        );
    }

    #[test]
    fn errors_say_what_and_where() {
        let e = Expr::parse("n % ").unwrap_err();
        assert!(e.message.contains("expected a value"), "{e}");
        let e = Expr::parse("n = 4").unwrap_err();
        assert!(e.message.contains("=="), "{e}");
        assert_eq!(e.offset, 2);
        let e = Expr::parse("foo(1)").unwrap_err();
        assert!(e.message.contains("unknown function `foo`"), "{e}");
        let e = Expr::parse("min(1)").unwrap_err();
        assert!(e.message.contains("takes 2"), "{e}");
        let e = Expr::parse("a < b < c").unwrap_err();
        assert!(e.message.contains("chained"), "{e}");
        let e = Expr::parse("(a + b").unwrap_err();
        assert!(e.message.contains("`)`"), "{e}");
        let e = Expr::parse("a $ b").unwrap_err();
        assert!(e.message.contains("unexpected character"), "{e}");
        let e = Expr::parse("99999999999999999999").unwrap_err();
        assert!(e.message.contains("invalid integer"), "{e}");
        let deep = "(".repeat(500) + "1" + &")".repeat(500);
        assert!(Expr::parse(&deep).unwrap_err().message.contains("deeply"));
        let deep = "-".repeat(500) + "x";
        assert!(Expr::parse(&deep).unwrap_err().message.contains("deeply"));
    }

    #[test]
    fn evaluation_errors_are_values() {
        let e = Expr::parse("a / b").unwrap();
        assert_eq!(
            e.eval(&env(&[("a", 1), ("b", 0)])),
            Err(EvalError::DivisionByZero("a / b".into()))
        );
        assert_eq!(
            e.eval(&env(&[("a", 1)])),
            Err(EvalError::UnknownVariable("b".into()))
        );
        let e = Expr::parse("x * x").unwrap();
        assert!(matches!(
            e.eval(&env(&[("x", i64::MAX)])),
            Err(EvalError::Overflow(_))
        ));
        assert!(matches!(ev_err("1 << 64"), EvalError::Domain(_)));
        assert!(matches!(ev_err("1 << 63"), EvalError::Overflow(_)));
        assert!(matches!(ev_err("log2(0)"), EvalError::Domain(_)));
        assert!(matches!(ev_err("ceil_div(1, 0)"), EvalError::Domain(_)));
        assert!(matches!(
            ev_err("(-9223372036854775807 - 1) / -1"),
            EvalError::Overflow(_)
        ));
    }

    fn ev_err(text: &str) -> EvalError {
        Expr::parse(text).unwrap().eval(&Env::new()).unwrap_err()
    }

    #[test]
    fn tricky_prints_read_back_equal() {
        for text in [
            "-(5)",
            "-(-5)",
            "(a == b) == c",
            "(a < b) != (c < d)",
            "-9223372036854775808",
            "x - -(0)",
        ] {
            let e = Expr::parse(text).unwrap();
            assert_eq!(
                Expr::parse(&e.to_string()).unwrap(),
                e,
                "`{text}` printed as `{e}`"
            );
        }
        let min = Expr::literal(i64::MIN);
        assert_eq!(
            Expr::parse(&min.to_string()).unwrap().eval(&Env::new()),
            Ok(i64::MIN)
        );
        assert!(Expr::parse("9223372036854775808").is_err());
    }

    #[test]
    fn long_chains_are_refused_before_they_are_built() {
        let fine = "1 + ".repeat(60) + "1";
        assert_eq!(Expr::parse(&fine).unwrap().eval(&Env::new()), Ok(61));
        let hostile = "1 + ".repeat(100_000) + "1";
        assert!(Expr::parse(&hostile)
            .unwrap_err()
            .message
            .contains("deeply"));
    }

    #[test]
    fn variables_are_collected() {
        let e = Expr::parse("n / (VEC * ITEMS) + min(n, WG)").unwrap();
        let vars: Vec<_> = e.variables().into_iter().collect();
        assert_eq!(vars, ["ITEMS", "VEC", "WG", "n"]);
    }

    #[test]
    fn serde_as_string() {
        let e = Expr::parse("n*2").unwrap();
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, "\"n * 2\"");
        let back: Expr = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        assert!(serde_json::from_str::<Expr>("\"n *\"").is_err());
    }
}
