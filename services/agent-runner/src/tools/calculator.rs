//! The `calculator` built-in: a safe arithmetic evaluator.
//!
//! It understands numbers (`12`, `3.5`, `1e3`), `+ - * / ^` (power, right
//! associative), unary minus and parentheses, and nothing else: no names, no
//! functions, no side effects. Expressions are bounded in length and nesting
//! depth, and a result that is not a finite number is an error, so whatever
//! the model sends, evaluation is quick and cannot panic.

/// The longest expression accepted, in bytes.
pub const MAX_EXPRESSION_LEN: usize = 512;
/// The deepest nesting of parentheses and unary operators accepted.
pub const MAX_DEPTH: usize = 64;

/// Why an expression cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalcError {
    /// The expression is empty.
    #[error("the expression is empty")]
    Empty,
    /// The expression is longer than [`MAX_EXPRESSION_LEN`].
    #[error("the expression is longer than {MAX_EXPRESSION_LEN} characters")]
    TooLong,
    /// Parentheses or unary operators nest deeper than [`MAX_DEPTH`].
    #[error("the expression nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// Something other than a number, operator or parenthesis.
    #[error("unexpected `{found}` at position {position}")]
    Unexpected {
        /// What was found (`end of input` at the end).
        found: String,
        /// The byte offset.
        position: usize,
    },
    /// Division by zero.
    #[error("division by zero")]
    DivisionByZero,
    /// The result overflowed or is not a number.
    #[error("the result is not a finite number")]
    NotFinite,
}

/// Evaluates an arithmetic expression.
pub fn evaluate(expression: &str) -> Result<f64, CalcError> {
    if expression.len() > MAX_EXPRESSION_LEN {
        return Err(CalcError::TooLong);
    }
    if expression.trim().is_empty() {
        return Err(CalcError::Empty);
    }
    let mut parser = Parser {
        text: expression.as_bytes(),
        pos: 0,
        depth: 0,
    };
    let value = parser.sum()?;
    parser.skip_spaces();
    if parser.pos < parser.text.len() {
        return Err(parser.unexpected());
    }
    finite(value)
}

/// Formats a result as the shortest decimal that reads back as the same
/// number (Rust's `Display` of `f64`): whole numbers without a fraction,
/// `117666.66666666667` rather than the binary noise of a fixed precision
/// (`117666.666666666672`); `-0` is `0`.
pub fn format_number(value: f64) -> String {
    if value == 0.0 {
        return "0".to_owned();
    }
    format!("{value}")
}

fn finite(value: f64) -> Result<f64, CalcError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(CalcError::NotFinite)
    }
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn skip_spaces(&mut self) {
        while self.pos < self.text.len() && self.text[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_spaces();
        self.text.get(self.pos).copied()
    }

    fn unexpected(&self) -> CalcError {
        let found = match self.text.get(self.pos) {
            None => "end of input".to_owned(),
            Some(_) => String::from_utf8_lossy(&self.text[self.pos..])
                .chars()
                .next()
                .map(String::from)
                .unwrap_or_default(),
        };
        CalcError::Unexpected {
            found,
            position: self.pos,
        }
    }

    fn enter(&mut self) -> Result<(), CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(CalcError::TooDeep)
        } else {
            Ok(())
        }
    }

    /// sum := product (('+' | '-') product)*
    fn sum(&mut self) -> Result<f64, CalcError> {
        let mut value = self.product()?;
        while let Some(op @ (b'+' | b'-')) = self.peek() {
            self.pos += 1;
            let rhs = self.product()?;
            value = finite(if op == b'+' { value + rhs } else { value - rhs })?;
        }
        Ok(value)
    }

    /// product := power (('*' | '/') power)*
    fn product(&mut self) -> Result<f64, CalcError> {
        let mut value = self.power()?;
        while let Some(op @ (b'*' | b'/')) = self.peek() {
            self.pos += 1;
            let rhs = self.power()?;
            value = if op == b'*' {
                finite(value * rhs)?
            } else if rhs == 0.0 {
                return Err(CalcError::DivisionByZero);
            } else {
                finite(value / rhs)?
            };
        }
        Ok(value)
    }

    /// power := unary ('^' power)?   (right associative)
    fn power(&mut self) -> Result<f64, CalcError> {
        let base = self.unary()?;
        if self.peek() == Some(b'^') {
            self.pos += 1;
            self.enter()?;
            let exponent = self.power()?;
            self.depth -= 1;
            return finite(base.powf(exponent));
        }
        Ok(base)
    }

    /// unary := ('-' | '+') unary | atom
    fn unary(&mut self) -> Result<f64, CalcError> {
        match self.peek() {
            Some(sign @ (b'-' | b'+')) => {
                self.pos += 1;
                self.enter()?;
                let value = self.unary()?;
                self.depth -= 1;
                Ok(if sign == b'-' { -value } else { value })
            }
            _ => self.atom(),
        }
    }

    /// atom := number | '(' sum ')'
    fn atom(&mut self) -> Result<f64, CalcError> {
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                self.enter()?;
                let value = self.sum()?;
                if self.peek() != Some(b')') {
                    return Err(self.unexpected());
                }
                self.pos += 1;
                self.depth -= 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            _ => Err(self.unexpected()),
        }
    }

    fn number(&mut self) -> Result<f64, CalcError> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            while p.pos < p.text.len() && p.text[p.pos].is_ascii_digit() {
                p.pos += 1;
            }
        };
        digits(self);
        if self.text.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            digits(self);
        }
        if matches!(self.text.get(self.pos), Some(b'e' | b'E')) {
            let mark = self.pos;
            self.pos += 1;
            if matches!(self.text.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            let exp_start = self.pos;
            digits(self);
            if self.pos == exp_start {
                self.pos = mark;
            }
        }
        let literal =
            std::str::from_utf8(&self.text[start..self.pos]).map_err(|_| self.unexpected())?;
        literal
            .parse::<f64>()
            .map_err(|_| CalcError::Unexpected {
                found: literal.to_owned(),
                position: start,
            })
            .and_then(finite)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_with_precedence_and_associativity() {
        assert_eq!(evaluate("1 + 2 * 3"), Ok(7.0));
        assert_eq!(evaluate("(1 + 2) * 3"), Ok(9.0));
        assert_eq!(evaluate("2 ^ 3 ^ 2"), Ok(512.0));
        assert_eq!(evaluate("-2 ^ 2"), Ok(4.0));
        assert_eq!(evaluate("10 / 4 - 1"), Ok(1.5));
        assert_eq!(evaluate("1e3 + .5"), Ok(1000.5));
        assert_eq!(evaluate("8 - 3 - 2"), Ok(3.0));
        assert_eq!(
            evaluate("(120000 + 135000 + 98000) / 3").map(format_number),
            Ok("117666.66666666667".to_owned())
        );
    }

    #[test]
    fn rejects_anything_but_arithmetic() {
        assert!(matches!(
            evaluate("2 + x"),
            Err(CalcError::Unexpected { position: 4, .. })
        ));
        assert!(matches!(
            evaluate("system(\"ls\")"),
            Err(CalcError::Unexpected { .. })
        ));
        assert!(matches!(
            evaluate("(1 + 2"),
            Err(CalcError::Unexpected { .. })
        ));
        assert!(matches!(evaluate("1 +"), Err(CalcError::Unexpected { .. })));
        assert_eq!(evaluate("   "), Err(CalcError::Empty));
        assert_eq!(evaluate("1 / (2 - 2)"), Err(CalcError::DivisionByZero));
        assert_eq!(evaluate("10 ^ 400"), Err(CalcError::NotFinite));
    }

    #[test]
    fn bounds_length_and_depth() {
        assert_eq!(evaluate(&"1+".repeat(300)), Err(CalcError::TooLong));
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert_eq!(evaluate(&deep), Err(CalcError::TooDeep));
        let minus = "-".repeat(200) + "1";
        assert_eq!(evaluate(&minus), Err(CalcError::TooDeep));
        assert_eq!(
            evaluate(&format!("{}1", "2^".repeat(100))),
            Err(CalcError::TooDeep)
        );
    }

    #[test]
    fn formats_whole_and_fractional_results() {
        assert_eq!(format_number(42.0), "42");
        assert_eq!(format_number(-3.0), "-3");
        assert_eq!(format_number(1.5), "1.5");
        assert_eq!(format_number(1.0 / 3.0), "0.3333333333333333");
        assert_eq!(format_number(-0.0), "0");
        assert_eq!(format_number(1e20), "100000000000000000000");
        for value in [0.1 + 0.2, 353000.0 / 3.0, -2.5e-7, f64::MAX] {
            assert_eq!(format_number(value).parse::<f64>(), Ok(value), "reads back");
        }
    }
}
