"""The superset of headers a source can read (lazykern.compile._include_graph), by NVRTC's search rules."""

from __future__ import annotations

import os

import pytest

from lazykern.compile import _include_graph


def _graph(tmp_path, source: str, files: dict[str, str], search: list[str] = (), defines=(), here=None):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    dirs = [str(tmp_path / d) for d in search]

    def read(path: str) -> bytes:
        with open(path, "rb") as fh:
            return fh.read()

    follower = _include_graph.Follower(dirs, [], list(defines), os.path.isfile, read)
    follower.start(source, str(tmp_path) if here is None else here)
    return follower.finish()


def test_quoted_includes_search_the_includers_directory_then_the_search_path(tmp_path):
    g = _graph(
        tmp_path,
        '#include "sub/a.h"\n',
        {"sub/a.h": '#include "b.h"\n', "inc/b.h": "\n"},
        search=["inc"],
    )
    assert g.files == [f"{tmp_path}/sub/a.h", f"{tmp_path}/inc/b.h"]
    assert f"{tmp_path}/sub/b.h" in g.absent and not g.unknown


def test_every_branch_and_every_include_next_match_is_followed(tmp_path):
    g = _graph(
        tmp_path,
        "#if 0\n#include <a.h>\n#endif\n#include_next <b.h>\n",
        {"i1/a.h": "\n", "i1/b.h": "\n", "i2/b.h": "\n"},
        search=["i1", "i2"],
    )
    assert g.files == [f"{tmp_path}/i1/a.h", f"{tmp_path}/i1/b.h", f"{tmp_path}/i2/b.h"]


def test_macro_operands_expand_through_every_definition_anywhere(tmp_path):
    g = _graph(
        tmp_path,
        '#include HDR\n#include "pick.h"\n',
        {
            "inc/pick.h": "#ifdef X\n#define HDR <a.h>\n#else\n#define HDR OTHER\n#endif\n#define OTHER <b.h>\n",
            "inc/a.h": "\n",
            "inc/b.h": "\n",
        },
        search=["inc"],
    )
    assert {f"{tmp_path}/inc/a.h", f"{tmp_path}/inc/b.h"} <= set(g.files) and not g.unknown
    g = _graph(tmp_path, "#include VIA_D\n", {"inc/c.h": "\n"}, search=["inc"], defines=["VIA_D=<c.h>"])
    assert g.files == [f"{tmp_path}/inc/c.h"] and not g.unknown


@pytest.mark.parametrize("source", ["#define H(x) <x>\n#include H(a.h)\n", "#include NOWHERE\n", "#include __FILE__\n"])
def test_an_operand_that_cannot_be_expanded_is_unknown(tmp_path, source):
    assert "cannot expand" in _graph(tmp_path, source, {}).unknown


@pytest.mark.parametrize(
    "source",
    [
        '#if __has_include("opt.h")\n#endif\n',
        '#if __has_\\\ninclude /* c */ ( "opt.h" )\n#endif\n',
        '#define HI __has_include\n#define HJ HI\n#if HJ("opt.h")\n#endif\n',
        '#define HAVE_OPT __has_include("opt.h")\n#if HAVE_OPT\n#endif\n',
    ],
)
def test_every_spelling_of_a_probe_is_found(tmp_path, source):
    g = _graph(tmp_path, source, {})
    assert f"{tmp_path}/opt.h" in g.absent and not g.unknown
    (tmp_path / "opt.h").write_text("\n")
    assert _graph(tmp_path, source, {}).present == {f"{tmp_path}/opt.h"}


@pytest.mark.parametrize(
    "source",
    [
        "#if defined(__has_include)\n#endif\n",
        "#ifdef __has_include\n#endif\n",
        "#if defined __has_include\n#endif\n",
        "#define HI __has_include\n#undef HI\n",
    ],
)
def test_asking_whether_a_probe_exists_is_not_a_probe(tmp_path, source):
    g = _graph(tmp_path, source, {})
    assert not g.unknown and not g.absent


@pytest.mark.parametrize(
    "source",
    [
        '#define N "opt.h"\n#if __has_include(N)\n#endif\n',
        '#define H(x) __has_include(x)\n#if H("opt.h")\n#endif\n',
        '#define CAT(a, b) a##b\n#if CAT(__has_, include)("opt.h")\n#endif\n',
        '#define ID(x) x\n#if ID(__has_include)("opt.h")\n#endif\n',
    ],
)
def test_a_probe_a_macro_spells_is_unknown(tmp_path, source):
    assert _graph(tmp_path, source, {}).unknown


def test_a_probe_in_a_macro_body_may_run_in_any_files_directory(tmp_path):
    g = _graph(tmp_path, '#include "sub/a.h"\n', {"sub/a.h": '#define HAVE __has_include("opt.h")\n'})
    assert {f"{tmp_path}/opt.h", f"{tmp_path}/sub/opt.h"} <= g.absent


def test_line_names_come_from_every_file_and_the_clock_from_anywhere(tmp_path):
    """The source is compiled as written (issue 43): its own #line names are trace names too."""
    g = _graph(tmp_path, '#line 1 "src"\n#include "g.h"\n', {"g.h": '# 1 "gen.tmpl"\nint t = __DATE__;\n'})
    assert g.line_names == {"src", "gen.tmpl"} and "__DATE__" in g.clock
    assert g.renaming == {f"{tmp_path}/g.h"}  # only a header renames the events of what it includes


def test_a_paste_that_may_spell_a_clock_macro_reads_the_clock(tmp_path):
    g = _graph(tmp_path, "#define CAT(a, b) a##b\nconst char *t = CAT(__TI, ME__);\n", {})
    assert "paste" in g.clock
    assert not _graph(tmp_path, "#define CAT(a, b) a##b\nint CAT(x, y);\n", {}).clock
