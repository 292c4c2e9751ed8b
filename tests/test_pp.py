"""The preprocessor's view of a file (lazykern.compile._pp): phases 1-3, then directives as tokens."""

from __future__ import annotations

import pytest

from lazykern.compile import _pp


def _includes(text: str) -> list[str | None]:
    return [inc.name for inc in _pp.scan(text).includes]


@pytest.mark.parametrize(
    "text",
    [
        "#inc\\\nlude <v.h>\n",
        "#\\\ninclude <v.h>\n",
        "  #  include/* c */<v.h>\n",
        "# /* a\ncomment */ include <v.h>\n",
        "%:include <v.h>\n",
        "#include <v.h>\r\n",
        "#include \\\n<v.h>\n",
    ],
)
def test_an_include_is_seen_after_splices_and_comments(text):
    assert _includes(text) == ["<v.h>"]


@pytest.mark.parametrize(
    "text",
    [
        "// #include <v.h>\n",
        "/* #include <v.h> */\n",
        "/* a\n#include <v.h>\n*/\n",
        'const char *s = "\\n#include <v.h>";\n',
        'const char *s = R"(\n#include <v.h>\n)";\n',
        "// a comment \\\n#include <v.h>\n",  # the splice makes the include part of the comment
        "int a; #include <v.h>\n",  # not at the start of a line
    ],
)
def test_text_that_is_not_a_directive_is_not_an_include(text):
    assert _includes(text) == []


def test_a_backslash_then_blanks_is_no_splice():
    """NVRTC 13.5 splices only backslash-newline: after `// c \\ ` the next line is code."""
    assert _includes("// c \\ \n#include <v.h>\n") == ["<v.h>"]


def test_macro_operands_are_tokens_not_names():
    inc = _pp.scan("#include HDR\n#define HDR <a/b.h>\n").includes[0]
    assert inc.name is None and [t.text for t in inc.tokens] == ["HDR"]
    define = _pp.scan("#define HDR <a/b.h>\n").defines[0]
    assert (define.name, define.function_like, define.text) == ("HDR", False, "<a/b.h>")
    assert _pp.scan("#define F(x) x\n#define G (x)\n").defines[0].function_like
    assert not _pp.scan("#define G (x)\n").defines[0].function_like


def test_line_names_from_line_directives_and_markers():
    scan = _pp.scan('#line 3 "a.tmpl"\n# 1 "<built-in>"\n# 7 "sub/b.h" 2\n#li\\\nne 9 "c\\\\d"\n#line 12\n')
    assert scan.line_names == {"a.tmpl", "<built-in>", "sub/b.h", "c\\d"} and not scan.line_unknown
    assert _pp.scan("#define N 1\n#line N\n").line_unknown
    assert _pp.scan("#line 1 NAME\n").line_unknown


def test_identifiers_and_pastes_are_reported():
    scan = _pp.scan("#define CAT(a, b) a ## b\nconst char *t = __TI\\\nME__;\n")
    assert scan.pastes and "__TIME__" in scan.identifiers
    assert not _pp.scan('const char *t = "__TIME__ ##";\n').identifiers & {"__TIME__"}
