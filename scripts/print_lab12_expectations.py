#!/usr/bin/env python3
"""Prints the expected values that tests/lab12_test.cpp holds as literals, from Python itself.

Two referees outside the workbook's C++: the `regex` module's matches of GPT-2's pattern (the
pre-tokens of Block A's tests) and bytes.decode("utf-8", errors="replace") (the replacements of
Block C's). The test's literals were printed by this script (python3-regex 2022.10.31, Python
3.11); run it again and compare with the test to check them (maintainers; needs python3-regex,
scripts/install-deps.sh --fixtures).

    /usr/bin/python3 scripts/print_lab12_expectations.py
"""
import sys

try:
    import regex
except ImportError:
    sys.exit("print_lab12_expectations.py: needs the regex module: apt-get install python3-regex")

PATTERN = regex.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

PRETOKENIZE = [
    "Hello, world! I'm here.",
    "they'll we've I'D don't",
    "emoji \U0001F600\U0001F600 ok",
    "  two  spaces\n\n\nthree newlines   ",
    "a\tb \u00a0c",
    "caf\u00e9 na\u00efve \u4e2d\u6587 \u0663\u0664 x\u00b2",
]

REPLACE = [
    b"a\xf1\x80\x80\xe1\x80\xc2b\x80c\x80\xbfd",  # the Unicode standard's table 3-8
    b"\xed\xa0\x80x", b"\xf0\x80\x80", b"\xe0\xa0", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"ok\xff",
    b"\xf0\x9f\x98", b"\xe2\x82\xac\xe2\x82", "caf\u00e9 \U0001F600".encode(),
]


def cpp(data: bytes) -> str:
    """A C++ string literal of `data`, split where a hex escape would swallow a hex digit."""
    out, after_escape = "", False
    for b in data:
        if 32 <= b < 127 and b not in (34, 92):
            if after_escape and chr(b) in "0123456789abcdefABCDEF":
                out += '" "'
            out += chr(b)
            after_escape = False
        else:
            out += "\\x%02x" % b
            after_escape = True
    return '"' + out + '"'


def main():
    print("// Pretokenize: (text, the pre-tokens of regex.findall)")
    for text in PRETOKENIZE:
        pretokens = ", ".join(cpp(t.encode()) for t in PATTERN.findall(text))
        print("{" + cpp(text.encode()) + ", {" + pretokens + "}},")
    print('// Decode: (bytes, bytes.decode("utf-8", errors="replace").encode())')
    for data in REPLACE:
        print("{" + cpp(data) + ", " + cpp(data.decode("utf-8", errors="replace").encode()) + "},")


if __name__ == "__main__":
    main()
