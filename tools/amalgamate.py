#!/usr/bin/env python3
"""amalgamate.py — writes kiln's library as one C file, as SQLite and Lua ship theirs.

    amalgamate.py --out DIR --header src/kiln.h --lib FILE... --port NAME FILE... [--port ...]

`make amalgamation` runs it with the Makefile's file lists, so nothing here names a source
file. DIR gets kiln.c and a copy of the public header kiln.h; `cc -c kiln.c` builds the
library for any target in one compiler call.

How the files become one translation unit:
- Every internal header ("x.h", resolved from the including file's folder) is inlined where
  it is first included outside any #if and dropped after that (its guard would keep a repeat
  empty); one included inside #if is inlined there every time. System headers stay as
  #include <...>; the public header stays #include "kiln.h".
- A port is a set of files compiled under #if KN_PORT_<NAME>; which one is chosen from the
  compiler's predefined macros unless the user defines one (see PORT_PICK below). Feature-test
  macros (_POSIX_C_SOURCE, _GNU_SOURCE) go to the top, under the condition of the part that
  defined them, since they must precede every system header.
- Every macro a .c file defines is #undef'd after that file, so it cannot reach the next.
- Every file-scope name that a .c file keeps to itself (static function or variable,
  typedef, struct/union/enum tag, enum constant) is renamed NAME__FILE, FILE being the
  file's name without .c. The house style keeps helpers static with short names (put, run,
  plan), so two files sharing one is the rule, not a mistake to fix in the sources; and a C
  library may declare names beyond the standard's (glibc's uint and fdiv under _GNU_SOURCE)
  that differ from libc to libc. A tag that completes a type a header declares
  (struct Tape { ... }) keeps its name. Renaming is done on tokens: an identifier after
  . or -> is a member and stays, as does one that a struct or union body declares; after
  struct, union or enum it is a tag. A mistake here fails to compile (an unknown member or
  type); it cannot bind a name to another file's definition, since no file-local name is
  left as it was. A header macro that names a file-local name is refused, as that name
  would mean a different thing in each file that expands it.
"""
import argparse
import os
import re
import sys

TOKEN = re.compile(r"""
    (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<newline>\n)
  | (?P<space>[ \t\r\f\v]+|\\\n)
  | (?P<punct>->|\+\+|--|<<=|>>=|\.\.\.|&&|\|\||[<>=!+\-*/%&|^]=|<<|>>|\#\#|.)
""", re.S | re.X)

KEYWORDS = set("""auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch typedef union
    unsigned void volatile while _Bool _Complex _Static_assert __attribute__ __typeof__ __inline__
    __restrict__ __extension__ __asm__ asm""".split())

FEATURE = re.compile(r"_[A-Z0-9_]*_SOURCE$")

# The port a build gets when none of KN_PORT_<NAME> is defined: the compiler's own
# predefined macros say which platform this is.
PORT_PICK = [("wasm", "defined(__wasm__) || defined(__EMSCRIPTEN__)"),
             ("posix", "defined(__unix__) || defined(__unix) || defined(__APPLE__)"),
             ("baremetal", None)]


def die(msg):
    sys.exit("amalgamate: " + msg)


def tokens(text):
    return [(m.lastgroup, m.group()) for m in TOKEN.finditer(text)]


class Source:
    """A file as tokens, split into directives (one token list per line) and code tokens."""

    def __init__(self, path):
        self.path = os.path.normpath(path)
        with open(path, encoding="utf-8") as f:
            self.toks = tokens(f.read())
        self.items = []  # ("dir", [tokens]) or ("tok", token)
        line_start = True
        i = 0
        while i < len(self.toks):
            kind, text = self.toks[i]
            if line_start and text == "#":
                j = i
                while j < len(self.toks) and self.toks[j][0] != "newline":
                    j += 1
                self.items.append(("dir", self.toks[i:j]))
                i = j
                continue
            if kind == "newline":
                line_start = True
            elif kind not in ("space", "comment"):
                line_start = False
            self.items.append(("tok", self.toks[i]))
            i += 1
        # the next significant token after each item, for the renamer's look-ahead
        self.after, nxt = [None] * len(self.items), None
        for j in range(len(self.items) - 1, -1, -1):
            self.after[j] = nxt
            kind, item = self.items[j]
            if kind == "dir":
                nxt = None
            elif item[0] not in ("space", "comment", "newline"):
                nxt = item[1]

    def next_sig(self, i):
        return self.after[i]


def directive(toks):
    """(name, the significant tokens after it) of a directive line."""
    sig = [t for t in toks if t[0] not in ("space", "comment")]
    return (sig[1][1] if len(sig) > 1 else ""), sig[2:]


def declarator(seg):
    """The name a declaration segment declares (after bodies and attributes are cut out)."""
    for k in range(len(seg) - 1):
        if seg[k] == "(" and seg[k + 1] == "*":  # (*name)(...): a function pointer
            for t in seg[k + 1:]:
                if re.match(r"[A-Za-z_]", t) and t not in KEYWORDS:
                    return t
    depth, last = 0, None
    for t in seg:
        if t in "([" and depth == 0 and last:
            return last
        depth += t in "([" and 1 or t in ")]" and -1 or 0
        if depth == 0 and re.match(r"[A-Za-z_]", t) and t not in KEYWORDS:
            last = t
    return last


def top_level(src):
    """What src keeps to itself at file scope: (local, macros).

    local: {name: "type" or "value"} for statics, typedefs and enum constants, and
    {"struct NAME": "tag"} for the struct, union and enum tags it defines (tags are names
    of their own); macros: the names src #defines."""
    local, macros = {}, []
    decl, depth, body_kind, prev = [], 0, None, None
    for kind, item in src.items:
        if kind == "dir":
            name, rest = directive(item)
            if name == "define" and rest:
                macros.append(rest[0][1])
            continue
        k, t = item
        if k in ("space", "comment", "newline"):
            continue
        if depth > 0:
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
            elif depth == 1 and body_kind == "enum" and prev in ("{", ",") and k == "ident":
                local[t] = "value"
            if depth == 0:
                decl.append("{}")
            prev = t
            continue
        if t == "{":
            body_kind = None
            for j in range(len(decl) - 1, -1, -1):
                if decl[j] in ("struct", "union", "enum"):
                    body_kind = decl[j]
                    if j + 1 < len(decl) and decl[j + 1] not in KEYWORDS and re.match(r"[A-Za-z_]", decl[j + 1]):
                        local["struct " + decl[j + 1]] = "tag"
                    break
                if decl[j] in ("=", ")"):
                    break
            depth = 1
            if decl and decl[-1] == ")":  # a function body: the declaration ends with it
                finish(decl, local)
                decl = []
                body_kind = "function"
            prev = t
            continue
        if t == ";":
            finish(decl, local)
            decl = []
        else:
            decl.append(t)
        prev = t
    return local, macros


def finish(decl, local):
    """Adds what one top-level declaration (its tokens, bodies as "{}") keeps local."""
    # cut __attribute__((...)) and bodies ("{}" placeholders) out
    seg, i = [], 0
    while i < len(decl):
        if decl[i] == "__attribute__":
            depth, i = 0, i + 1
            while i < len(decl):
                depth += decl[i] == "(" and 1 or decl[i] == ")" and -1 or 0
                i += 1
                if depth == 0:
                    break
            continue
        if decl[i] != "{}":
            seg.append(decl[i])
        i += 1
    if not seg or seg[0] in ("_Static_assert",):
        return
    parts, depth, cur = [], 0, []
    for t in seg:
        depth += t in "([" and 1 or t in ")]" and -1 or 0
        if t == "," and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    parts = [p[:p.index("=")] if "=" in p else p for p in parts]
    names = [declarator(p) for p in parts]
    if "static" in seg or "typedef" in seg:
        for n in names:
            if n:
                local[n] = "type" if "typedef" in seg else "value"


class Amalgamation:
    def __init__(self, public):
        self.public = os.path.normpath(public)
        self.out = []
        self.headers = {}  # path -> Source

    def include_path(self, src, toks):
        m = re.match(r'"(.*)"$', toks[0][1]) if toks else None
        if not m:
            return None
        path = os.path.normpath(os.path.join(os.path.dirname(src.path), m.group(1)))
        if not os.path.exists(path):
            die("%s: cannot find %s" % (src.path, m.group(1)))
        return path

    def emit(self, src, seen, rename, feature, out, conditional=0):
        """Writes src's tokens to out: headers inlined, names renamed, feature macros taken out."""
        struct_depth, depth, prev, pending = [], 0, None, None
        for i, (kind, item) in enumerate(src.items):
            if kind == "dir":
                name, rest = directive(item)
                if name in ("if", "ifdef", "ifndef"):
                    conditional += 1
                elif name == "endif":
                    conditional -= 1
                if name == "include":
                    path = self.include_path(src, rest)
                    if path == self.public:
                        continue  # included once, at the top
                    if path:
                        if path in seen:
                            continue
                        if conditional == 0:
                            seen.add(path)
                        h = self.headers.setdefault(path, Source(path))
                        out.append("/* ---- %s ---- */\n" % path)
                        self.emit(h, seen, {}, feature, out, conditional)
                        out.append("/* ---- end of %s ---- */" % path)
                        continue
                if name == "define" and rest and FEATURE.match(rest[0][1]):
                    feature.append("".join(t for _, t in item))
                    continue
                out.append(self.renamed(item, rename, name == "include"))
                continue
            k, t = item
            if k == "ident":
                t = self.rename(t, rename, prev, src.next_sig(i), bool(struct_depth))
            if k not in ("space", "comment", "newline"):
                if t in ("struct", "union"):
                    pending = depth
                elif t == "{":
                    depth += 1
                    if pending is not None:
                        struct_depth.append(depth)
                    pending = None
                elif t == "}":
                    if struct_depth and struct_depth[-1] == depth:
                        struct_depth.pop()
                    depth -= 1
                elif t in (";", "(", ")", ",", "="):
                    pending = None
                prev = t
            out.append(t)

    @staticmethod
    def rename(t, rename, prev, nxt, in_struct):
        """t's name in the amalgamation: a tag after struct/union/enum, a member after . or
        -> or where a struct body declares it (followed by ; , [ : or the ) of (*name))."""
        if prev in ("struct", "union", "enum"):
            return rename.get("struct " + t, (t,))[0]
        if prev in (".", "->") or in_struct and nxt in (";", ",", "[", ":", ")"):
            return t
        return rename.get(t, (t,))[0]

    @classmethod
    def renamed(cls, toks, rename, keep):
        if keep:
            return "".join(t for _, t in toks)
        res, prev = [], None
        for k, t in toks:
            if k == "ident":
                t = cls.rename(t, rename, prev, None, False)
            if k not in ("space", "comment"):
                prev = t
            res.append(t)
        return "".join(res)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--header", required=True)
    ap.add_argument("--lib", nargs="+", required=True)
    ap.add_argument("--port", nargs="+", action="append", default=[], metavar=("NAME", "FILE"))
    a = ap.parse_args()
    known = [p for p, _ in PORT_PICK]
    ports = [(p[0], p[1:]) for p in a.port]
    for name, files in ports:
        if name not in known or not files:
            die("--port %s: a port is one of %s, then its files" % (name, ", ".join(known)))

    parts = [(None, f) for f in a.lib] + [(name, f) for name, files in ports for f in files]
    sources = [(port, Source(f)) for port, f in parts]
    stems = [os.path.splitext(os.path.basename(s.path))[0] for _, s in sources]
    tags = [st if stems.count(st) == 1 else s.path.replace("/", "_")[:-2] for st, (_, s) in zip(stems, sources)]

    # What every file defines at file scope, and what the headers they include define.
    tops = [top_level(s) for _, s in sources]
    am = Amalgamation(a.header)
    header_names, header_macros = set(), {}
    todo = list(sources)
    while todo:  # every header the files include, and those they include
        _, s = todo.pop()
        for kind, item in s.items:
            if kind == "dir" and directive(item)[0] == "include":
                path = am.include_path(s, directive(item)[1])
                if path and path not in am.headers:
                    am.headers[path] = Source(path)
                    todo.append((None, am.headers[path]))
    for path, h in am.headers.items():
        # any identifier a header mentions (a tag it declares, a prototype's name) is its own
        for kind, item in h.items:
            idents = {t for k, t in ([item] if kind == "tok" else item) if k == "ident"}
            header_names |= idents
            if kind == "dir" and directive(item)[0] == "define":
                header_macros[path] = header_macros.get(path, set()) | idents

    # Rename every file-local name but a tag that completes a header's type: a name that
    # two files share would clash, and one that a C library declares beyond the standard
    # (glibc's uint and fdiv, where _GNU_SOURCE is on) may differ from libc to libc.
    renames, renamed = [], set()
    for tag, (loc, _) in zip(tags, tops):
        rn = {n: (n.split()[-1] + "__" + tag, kind) for n, kind in loc.items()
              if not (kind == "tag" and n.split()[-1] in header_names)}
        renames.append(rn)
        renamed |= {n for n in rn if " " not in n}
    for path, idents in header_macros.items():
        clash = sorted(idents & renamed)
        if clash:
            die("%s: a macro names %s, which a source file keeps to itself" % (path, ", ".join(clash)))

    # The library's files share the headers they inline; each port starts from the
    # library's (its files are compiled apart from the other ports').
    out, feature, seen_by = {}, {}, {None: set()}
    for (port, s), rn, (_, macros) in zip(sources, renames, tops):
        body = out.setdefault(port, [])
        seen = seen_by.setdefault(port, set(seen_by[None]))
        body.append("\n/* ==== %s ==== */\n" % s.path)
        am.emit(s, seen, rn, feature.setdefault(port, []), body)
        undef = sorted({m for m in macros if not FEATURE.match(m)})
        if undef:
            body.append("\n" + "".join("#undef %s\n" % m for m in undef))

    os.makedirs(a.out, exist_ok=True)
    with open(a.header, encoding="utf-8") as f:
        public = f.read()
    with open(os.path.join(a.out, os.path.basename(a.header)), "w", encoding="utf-8") as f:
        f.write(public)
    with open(os.path.join(a.out, "kiln.c"), "w", encoding="utf-8") as f:
        f.write(PREAMBLE.format(files="\n".join(" *   " + s.path for _, s in sources),
                                header=os.path.basename(a.header)))
        f.write(port_choice([n for n, _ in ports]))
        for port in [None] + [n for n, _ in ports]:
            lines = list(dict.fromkeys(feature.get(port, [])))
            if lines:
                cond = "#if KN_PORT_%s\n" % port.upper() if port else ""
                f.write(cond + "\n".join(lines) + "\n" + ("#endif\n" if port else ""))
        f.write('\n#include "%s"\n' % os.path.basename(a.header))
        f.write("".join(out[None]))
        for name, _ in ports:
            f.write("\n#if KN_PORT_%s\n" % name.upper())
            f.write("".join(out[name]))
            f.write("\n#endif /* KN_PORT_%s */\n" % name.upper())


def port_choice(names):
    """#if lines that define KN_PORT_<NAME> 1 for the first PORT_PICK entry that holds."""
    s = "\n#if %s\n" % " && ".join("!defined(KN_PORT_%s)" % n.upper() for n in names)
    picks = [(n, cond) for n, cond in PORT_PICK if n in names]
    for i, (n, cond) in enumerate(picks):
        last = i == len(picks) - 1
        s += "#if %s\n" % cond if i == 0 and not last else "#elif %s\n" % cond if not last else "#else\n" if i else ""
        s += "#define KN_PORT_%s 1\n" % n.upper()
    return s + ("#endif\n" if len(picks) > 1 else "") + "#endif\n"


PREAMBLE = """\
/*
 * kiln.c — the kiln library as one C file (an amalgamation, as SQLite and Lua ship
 * theirs), generated by `make amalgamation` from kiln's sources; edit those, not this.
 * Its only companion is {header}, the public header, beside it.
 *
 * It builds with one compiler call for any target, C99 or later:
 *
 *     cc -O2 -c kiln.c                                 Linux, macOS: link -lm -ldl -lpthread
 *     clang --target=wasm32-wasi -O2 -c kiln.c         WebAssembly (WASI)
 *     emcc -O2 -c kiln.c                               WebAssembly (Emscripten)
 *     arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -O2 -c kiln.c   a microcontroller: link -lm
 *
 * The port (what kiln needs from the platform: clock, files, threads, a compiler to
 * load generated code) is chosen by the compiler's predefined macros: __wasm__ or
 * __EMSCRIPTEN__ gives the wasm port (one thread, no JIT: backends interp and wasm),
 * __unix__ or __APPLE__ the posix port (threads, backend c through the system compiler
 * and dlopen), anything else the bare-metal port (no files, no clock; the board may
 * define kn_board_log and kn_board_now_ns, see below). Define one of KN_PORT_POSIX,
 * KN_PORT_WASM or KN_PORT_BAREMETAL to choose it yourself. With the posix port,
 * -DKN_HAVE_TCC and -ltcc add backend tcc (libtcc in memory).
 *
 * Every name a source file keeps to itself (a static function, a typedef) is renamed
 * NAME__FILE; every macro a source file defines is #undef'd after it. The sources, in order:
 *
{files}
 */
"""

if __name__ == "__main__":
    main()
