"""The only way the product decodes python-slimta's pickles; nothing a hostile pickle names runs.

slimta pickles all it stores (reference §A.1-A.3): disk ``.env`` (an `Envelope` or its subclass
`Bounce`) and ``.meta`` (``{'timestamp', 'attempts'[, 'delivered_indexes']}``), the Redis fields
``envelope`` and ``delivered_indexes`` (a list, or the *set* `Queue` passes, §A.4), the
``<prefix>queue`` items (``(timestamp, id)``) and S3 bodies. Whoever can write there can make a
naive ``pickle.loads`` run anything (§A.5). So decoding has two layers:

1. `inventory` walks the opcodes without loading, simulating the stack just far enough to name
   every global (module, name, offset), STACK_GLOBAL operands fetched from the memo included,
   and to check that the few allowed *functions* get literal, harmless arguments. Anything else
   -> `PickleRejected` listing every offender, before a single object is built.
2. `safe_loads` loads with an Unpickler whose `find_class` maps each allowed name to an inert
   stand-in defined here (slimta and email classes are never imported) and refuses the rest
   again (defence in depth). Any failure while loading -> `PickleCorrupt`.

The allow-list is what real slimta 5.0.5 objects pickle to with protocols 0-5
(datasets/slimta/make_pickle_fixtures.py): header objects wherever a header was *set*
(AddDateHeader, AddMessageIdHeader, SpamAssassin), ``email.errors`` defects wherever the message
was malformed. Error texts name globals, opcodes and offsets, never mail content.
"""

from __future__ import annotations

import _compat_pickle
import codecs
import contextlib
import copyreg
import datetime
import email._header_value_parser as _hvp
import email.errors as _email_errors
import email.headerregistry as _hr
import io
import pickle
import pickletools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple

from mqforensics.errors import InputError

UNSAFE_PICKLE, CORRUPT_PICKLE, WRONG_TYPE = "unsafe_pickle", "corrupt_pickle", "wrong_type"
MAX_PICKLE_BYTES = 512 << 20
MAX_OPCODES = 1_000_000  # a real envelope has a few thousand (a body is one); ~4 s to walk


class GlobalRef(NamedTuple):
    """A global a pickle names (after Python 2 name mapping) and its opcode's offset."""

    module: str
    name: str
    offset: int | None


class SlimtaPickleError(InputError):
    """A slimta pickle that was not decoded; `kind` is one of the three constants above."""

    kind = CORRUPT_PICKLE

    def __init__(self, detail: str, offset: int | None = None) -> None:
        super().__init__(f"{self.kind}: {detail}")
        self.detail, self.offset = detail, offset


class PickleCorrupt(SlimtaPickleError):
    def __init__(self, reason: str, offset: int | None = None) -> None:
        super().__init__(reason if offset is None else f"{reason} at offset {offset}", offset)


class PickleRejected(SlimtaPickleError):
    """Off the allow-list: every offender is in `globals`; nothing was loaded."""

    kind = UNSAFE_PICKLE

    def __init__(self, problems: list[tuple[GlobalRef, str]], detail: str = "") -> None:
        self.globals = [ref for ref, _ in problems]
        texts = [text for _, text in problems[:12]]
        texts += [f"and {len(problems) - 12} more"] if len(problems) > 12 else []
        super().__init__(detail or "; ".join(texts), problems[0][0].offset if problems else None)


class NotAnEnvelope(SlimtaPickleError):
    kind = WRONG_TYPE


class NotAMeta(SlimtaPickleError):
    kind = WRONG_TYPE


def _clip(text: str, limit: int = 60) -> str:
    text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _scrub(message: str) -> str:  # exception texts may quote data from the pickle
    return _clip(re.sub(r"""b?'[^']*'|b?"[^"]*"|\S+@\S+""", "'...'", message), 120)


def _normalise(module: str, name: str) -> tuple[str, str]:
    # Python 2 names -> Python 3, as Unpickler(fix_imports=True) maps them below protocol 3.
    # Both layers map on every protocol, so they agree by construction.
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


# ---- inert stand-ins ------------------------------------------------------------------------


class _Frozen(type):
    # BUILD with slot state calls setattr on whatever is on the stack, a class included: without
    # this a pickle could rebind our classes for every later decode in the process.
    def __setattr__(cls, name: str, value: Any) -> None:
        raise AttributeError(f"stand-in {cls.__name__} is read-only")


def _no_dunder(self: Any, name: str, value: Any) -> None:
    if name.startswith("__"):  # __class__ / __dict__ via BUILD slot state
        raise AttributeError(f"cannot set {name} on a stand-in")
    object.__setattr__(self, name, value)


def _set_state(self: Any, state: Any) -> None:
    # BUILD. The Unpickler looks __setstate__, append, extend and add up on the *instance*: an
    # attribute holding a callable would let a pickle call an allowed function with arguments
    # the walk never saw. Real slimta state never holds one.
    for part in state if type(state) is tuple and len(state) == 2 else (state,):
        if part is not None and type(part) is not dict:
            raise TypeError("BUILD state is not a dict")
        for name, value in (part or {}).items():
            if callable(value):
                raise TypeError("a stand-in attribute may not hold a class or function")
            _no_dunder(self, name, value)


class Inert(metaclass=_Frozen):
    """Any allowed plain class: keeps constructor arguments and BUILD's state, nothing else."""

    __setattr__, __setstate__ = _no_dunder, _set_state

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args:
            self.__dict__["args"] = args


class Envelope(Inert):
    is_bounce: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {}


class Bounce(Envelope):
    is_bounce = True  # slimta.bounce.Bounce's class attributes, in case the state lacks them
    defaults: ClassVar[dict[str, Any]] = {
        "sender": "",
        "receiver": None,
        "client": {"name": "postmaster", "ip": "127.0.0.1", "host": "localhost"},
    }


class Message(Inert):
    """email.message.Message/EmailMessage/MIMEPart: ``_headers``, ``_payload``, ``defects``..."""


class TokenList(list, metaclass=_Frozen):  # type: ignore[type-arg]
    """Every ``email._header_value_parser.TokenList`` subclass (a parse tree node)."""

    __setattr__, __setstate__ = _no_dunder, _set_state

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args[:1])


class Terminal(str, metaclass=_Frozen):
    """Every ``email._header_value_parser.Terminal`` subclass; NEWOBJ passes (value, type)."""

    __setattr__, __setstate__ = _no_dunder, _set_state

    def __new__(cls, value: object = "", *args: Any, **kwargs: Any) -> Terminal:
        if not isinstance(value, str):
            raise TypeError("a terminal's value must be a str")
        return super().__new__(cls, value)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


class HeaderValue(str, metaclass=_Frozen):
    """A header object's str value; its state (parse tree, defects, datetime) sits in __dict__."""

    __setattr__, __setstate__ = _no_dunder, _set_state


class _Slotted:
    """A marker (an argument only) or, label "function", a function whose `value` checks its
    arguments: no ``__dict__``, nothing a pickle can rebind."""

    __slots__ = ("label", "value")
    label: str
    value: Any

    def __init__(self, label: str, value: Any = None) -> None:
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "value", value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("read-only stand-in")

    def __call__(self, *args: Any) -> Any:
        if self.label != "function":
            raise TypeError("a marker is not callable")
        return self.value(*args)


class _Refused(Exception):
    def __init__(self, module: str, name: str) -> None:
        super().__init__(f"{module}.{name} refused its arguments")
        self.ref = GlobalRef(module, name, None)


_LATIN1 = ("latin1", "latin-1")


def _codecs_encode(text: Any, encoding: Any) -> bytes:
    # Protocols 0-2 write bytes as _codecs.encode(str(b, 'latin1'), 'latin1') (pickle.py).
    if not isinstance(text, str) or encoding not in _LATIN1:
        raise _Refused("_codecs", "encode")
    return text.encode("latin-1")


def _reconstructor(cls: Any, base: Any, state: Any) -> Any:
    # copyreg._reconstructor(cls, base, state): how protocols 0-1 save new-style instances.
    real = base.value if isinstance(base, _Slotted) and base.label == "base" else None
    if not isinstance(cls, _Frozen) or real is None or not issubclass(cls, real):
        raise _Refused("copyreg", "_reconstructor")
    fits: dict[type, Any] = {object: type(None), list: (list, tuple), str: str, dict: dict}
    if not isinstance(state, fits[real]):
        raise TypeError("state does not fit the base")
    new: Any = real.__new__
    obj = new(cls) if real is object else new(cls, state)
    if real in (list, dict):
        real.__init__(obj, state)
    return obj


def _reconstruct_header(cls_name: Any, bases: Any, value: Any) -> HeaderValue:
    # BaseHeader.__reduce__: (_reconstruct_header, (cls name, bases, str(self)), __dict__).
    if not all(isinstance(b, _Slotted) and b.label == "header" for b in bases):
        raise _Refused("email.headerregistry", "_reconstruct_header")
    if not isinstance(cls_name, str) or not isinstance(value, str):
        raise TypeError("bad header reconstruction arguments")
    return HeaderValue(value)


def _empty_bytes(*args: Any) -> bytes:
    if args:  # protocols 0-2 write b'' as builtins.bytes()
        raise _Refused("builtins", "bytes")
    return b""


# ---- allow-list ------------------------------------------------------------------------------


class _Entry(NamedTuple):
    obj: object  # what find_class returns
    role: str  # class (any call is harmless), marker (an argument only), function (checked)
    check: Callable[[Any], bool] | None = None  # the walk's check of a function's literal args


_ALLOWED: dict[tuple[str, str], _Entry] = {}


def _is(kind: Any, label: str) -> bool:
    entry = _ALLOWED.get((kind.module, kind.name)) if isinstance(kind, GlobalRef) else None
    if entry is None:
        return False
    return isinstance(entry.obj, _Frozen) if label == "stand-in" else (
        isinstance(entry.obj, _Slotted) and entry.obj.label == label
    )  # fmt: skip


def _add(module: str, name: str, obj: object, role: str = "class", check: Any = None) -> None:
    _ALLOWED[(module, name)] = _Entry(obj, role, check)


def _check_encode(a: Any) -> bool:
    return type(a) is tuple and len(a) == 2 and type(a[0]) is str and a[1] in _LATIN1


def _check_reconstructor(a: Any) -> bool:
    return type(a) is tuple and len(a) == 3 and _is(a[0], "stand-in") and _is(a[1], "base")


def _check_header(a: Any) -> bool:
    if type(a) is not tuple or len(a) != 3 or type(a[1]) is not tuple:
        return False
    return type(a[0]) is str and type(a[2]) is str and all(_is(b, "header") for b in a[1])


def _build_allow_list() -> None:
    _add("slimta.envelope", "Envelope", Envelope)
    _add("slimta.bounce", "Bounce", Bounce)
    for name in ("EmailMessage", "Message", "MIMEPart"):
        _add("email.message", name, Message)
    for module, name in (("email.policy", "EmailPolicy"), ("email.policy", "Compat32")):
        _add(module, name, Inert)
    _add("email._policybase", "Compat32", Inert)
    # Tokens and header classes: whatever this interpreter's stdlib defines, found by kind.
    for name, obj in vars(_hvp).items():
        if isinstance(obj, type) and issubclass(obj, (_hvp.TokenList, _hvp.Terminal)):
            _add(_hvp.__name__, name, TokenList if issubclass(obj, list) else Terminal)
    for name, obj in vars(_hr).items():
        if not isinstance(obj, type) or obj.__module__ != _hr.__name__:
            continue
        if issubclass(obj, _hr.BaseHeader) or hasattr(obj, "parse"):  # DateHeader is no str
            _add(_hr.__name__, name, _Slotted("header"), "marker")
        elif name in ("Address", "Group"):  # in AddressHeader state (_groups, _addresses)
            _add(_hr.__name__, name, Inert)
    for name, obj in vars(_email_errors).items():  # Message.defects, header _defects
        if isinstance(obj, type) and issubclass(obj, _email_errors.MessageDefect):
            _add(_email_errors.__name__, name, Inert)
    for name in ("datetime", "timezone", "timedelta"):  # DateHeader state: the real C types
        _add("datetime", name, getattr(datetime, name))
    _add("builtins", "set", set)  # sets before protocol 4
    _add("builtins", "frozenset", frozenset)
    for base in (object, list, str, dict):  # never called: only _reconstructor's base
        _add("builtins", base.__name__, _Slotted("base", base), "marker")
    for module, name, function, check in (
        ("builtins", "bytes", _empty_bytes, lambda a: a == ()),
        ("_codecs", "encode", _codecs_encode, _check_encode),
        ("copyreg", "_reconstructor", _reconstructor, _check_reconstructor),
        (_hr.__name__, "_reconstruct_header", _reconstruct_header, _check_header),
    ):
        _add(module, name, _Slotted("function", function), "function", check)


_build_allow_list()


# ---- layer 1: the opcode walk -----------------------------------------------------------------

_ANY, _NONE = object(), object()  # stack kinds besides str (literal), GlobalRef and tuple
_CODE2OP = {op.code: op for op in pickletools.opcodes}
_STRINGS = {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE",
            "BINUNICODE8"}  # fmt: skip


@dataclass
class _Walk:
    refs: list[GlobalRef]
    problems: list[tuple[GlobalRef, str]]
    protocol: int = 0


def _line(f: io.BytesIO) -> bytes:
    data = f.readline()
    if not data.endswith(b"\n"):
        raise ValueError("no newline")
    return data[:-1]


def _read_arg(op: pickletools.OpcodeInfo, f: io.BytesIO) -> Any:
    # pickletools' readers, but for two that disagree with the C Unpickler: genops decodes STRING
    # as ASCII (a Python 2 protocol-0 str with 8-bit bytes, e.g. a body, would not even walk)
    # and escape-decodes GLOBAL's names (the Unpickler decodes them as plain UTF-8).
    if op.arg is pickletools.stringnl:
        data = _line(f)
        if len(data) < 2 or data[0] != data[-1] or data[:1] not in (b"'", b'"'):
            raise ValueError("STRING argument not quoted")
        return codecs.escape_decode(data[1:-1])[0].decode("latin-1")  # type: ignore[attr-defined]
    if op.arg is pickletools.stringnl_noescape_pair:
        return _line(f).decode("utf-8"), _line(f).decode("utf-8")
    return None if op.arg is None else op.arg.reader(f)


def _walk(data: bytes, max_opcodes: int = MAX_OPCODES) -> _Walk:
    # Marks are kept apart, as in the C Unpickler: no opcode may pop below the last mark.
    f, stack, marks, memo, walk = io.BytesIO(data), [], [], {}, _Walk([], [])  # type: ignore[var-annotated]
    declared, newest = None, 0

    def pop(pos: int, mark_ok: bool = False) -> Any:
        if len(stack) > (marks[-1] if marks else 0):
            return stack.pop()
        if mark_ok and marks:  # POP on an empty frame drops the mark
            return marks.pop()
        raise PickleCorrupt("stack underflow", pos)

    def pop_mark(pos: int) -> list[Any]:
        if not marks:
            raise PickleCorrupt("no MARK on the stack", pos)
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        return items

    def note(module: Any, name: Any, pos: int, text: str = "") -> GlobalRef:
        if type(module) is not str or type(name) is not str:
            ref, text = GlobalRef("<unresolved>", "<unresolved>", pos), "non-literal STACK_GLOBAL"
        else:
            ref = GlobalRef(*_normalise(module, name), pos)
            if not text and (ref.module, ref.name) not in _ALLOWED:
                text = f"disallowed global {_clip(ref.module)}.{_clip(ref.name)}"
        walk.refs.append(ref)
        if text:
            walk.problems.append((ref, f"{text} at offset {pos}"))
        return ref

    def call(op: str, target: Any, args: Any, pos: int) -> None:
        entry = (
            _ALLOWED.get((target.module, target.name)) if isinstance(target, GlobalRef) else None
        )
        # Disallowed names are listed already; calling a class is harmless, a marker fails.
        if entry is None or entry.role != "function" or entry.check is None:
            return
        if op != "REDUCE" or not entry.check(args):
            ref = GlobalRef(target.module, target.name, pos)
            text = f"{ref.module}.{ref.name} called by {op} with disallowed arguments"
            walk.problems.append((ref, f"{text} at offset {pos}"))

    for count in range(max_opcodes + 1):
        pos, code = f.tell(), f.read(1)
        op = _CODE2OP.get(code.decode("latin-1"))
        if op is None:
            text = f"unknown opcode 0x{code[0]:02x}" if code else "pickle ends without STOP"
            raise PickleCorrupt(text, pos)
        if count == max_opcodes:
            raise PickleCorrupt(f"more than {max_opcodes} opcodes", pos)
        try:
            arg = _read_arg(op, f)
        except Exception as exc:  # truncated, oversized, undecodable
            raise PickleCorrupt(f"bad {op.name} argument ({_scrub(str(exc))})", pos) from None
        name, newest = op.name, max(newest, op.proto)
        if name == "PROTO":
            if not 0 <= arg <= pickle.HIGHEST_PROTOCOL:
                raise PickleCorrupt(f"unsupported protocol {arg}", pos)
            declared = arg if declared is None else declared
        elif name in _STRINGS:
            stack.append(arg)
        elif name in ("NONE", "EMPTY_TUPLE"):
            stack.append(_NONE if name == "NONE" else ())
        elif name.startswith("TUPLE"):
            items = pop_mark(pos) if name == "TUPLE" else [pop(pos) for _ in range(int(name[5]))]
            stack.append(tuple(items if name == "TUPLE" else reversed(items)))
        elif name == "DUP":  # the copy keeps its kind: a DUP'ed string can feed STACK_GLOBAL
            stack.extend([pop(pos)] * 2)
        elif name == "MEMOIZE" or name.endswith("PUT"):
            stack.append(pop(pos))
            if name != "MEMOIZE" and arg < 0:
                raise PickleCorrupt("negative memo index", pos)
            memo[len(memo) if name == "MEMOIZE" else arg] = stack[-1]  # C and pickle.py: len()
        elif name.endswith("GET"):
            if arg not in memo:
                raise PickleCorrupt(f"memo index {arg} not set", pos)
            stack.append(memo[arg])
        elif name == "GLOBAL":
            stack.append(note(arg[0], arg[1], pos))
        elif name == "STACK_GLOBAL":  # operands are often memo GETs ('email.headerregistry')
            attr = pop(pos)
            stack.append(note(pop(pos), attr, pos))
        elif name.startswith("EXT"):  # slimta never uses copyreg extension codes
            known = getattr(copyreg, "_inverted_registry", {}).get(arg)
            label = f"{arg}" if known is None else f"{arg}={known[0]}.{known[1]}"
            note("<extension>", _clip(label), pos, f"extension code {_clip(label)} ({name})")
            stack.append(_ANY)
        elif name in ("REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "INST"):
            if name in ("INST", "OBJ"):  # Python 2 wrote old-style classes (Message) this way
                items = pop_mark(pos)
                target = note(arg[0], arg[1], pos) if name == "INST" else items[:1] and items.pop(0)
            else:
                args = (pop(pos), pop(pos))[::-1] if name == "NEWOBJ_EX" else [pop(pos)]
                items, target = args[0], pop(pos)
            call(name, target, items, pos)
            stack.append(_ANY)
        elif name == "STOP":
            pop(pos)
            walk.protocol = declared if declared is not None else newest
            return walk
        elif name == "POP":
            pop(pos, mark_ok=True)
        elif name == "MARK":
            marks.append(len(stack))
        else:  # every other opcode: its documented stack effect
            before = op.stack_before
            if pickletools.markobject in before:
                pop_mark(pos)
                before = before[: before.index(pickletools.markobject)]
            for _ in before:
                pop(pos)
            stack.extend(_ANY for _ in op.stack_after)
    raise AssertionError("unreachable")


def inventory(data: bytes) -> list[GlobalRef]:
    """Every global the pickle names, in order, without loading it (`PickleCorrupt` if broken)."""
    return _walk(bytes(data)).refs


# ---- layer 2: loading with stand-ins ----------------------------------------------------------


class _Loader(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # also used by INST and EXT codes
        entry = _ALLOWED.get(_normalise(module, name))
        if entry is None:
            raise _Refused(_clip(module), _clip(name))
        return entry.obj


def _load(data: bytes, max_bytes: int, max_opcodes: int = MAX_OPCODES) -> tuple[Any, int]:
    data = bytes(data)
    if len(data) > max_bytes:
        raise PickleCorrupt(f"pickle of {len(data)} bytes is over the {max_bytes}-byte limit")
    walk = _walk(data, max_opcodes)
    if walk.problems:
        raise PickleRejected(walk.problems)
    try:  # latin1: a Python 2 str (8-bit body or header) loads as a str of the same bytes
        return _Loader(io.BytesIO(data), encoding="latin1").load(), walk.protocol
    except _Refused as exc:  # only if the two layers ever disagree
        raise PickleRejected([(exc.ref, f"refused while loading: {exc}")]) from None
    except Exception as exc:  # UnpicklingError, EOFError, TypeError, MemoryError, ...
        raise PickleCorrupt(f"cannot load: {type(exc).__name__}: {_scrub(str(exc))}") from None


def safe_loads(
    data: bytes, *, max_bytes: int = MAX_PICKLE_BYTES, max_opcodes: int = MAX_OPCODES
) -> Any:
    """The object a slimta pickle holds, built from stand-ins; raises `SlimtaPickleError`."""
    return _load(data, max_bytes, max_opcodes)[0]


# ---- the decoding API -------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvelopeData:
    sender: str | None
    recipients: list[str]
    client: dict[str, str | None]
    receiver: str | None
    timestamp: float | None  # arrival (Edge.handoff), not the meta's next attempt
    headers: list[tuple[str, str]]
    body_bytes: int
    message_bytes: int  # "name: value\r\n" per header + "\r\n" + body (no refolding)
    is_bounce: bool
    message_id: str | None
    pickle_protocol: int
    # The message after the headers, as stored (never in a row or an error: content search only).
    body: bytes = field(default=b"", repr=False, compare=False)

    def flatten(self) -> tuple[bytes, bytes]:
        """(header bytes, body bytes), as slimta's ``Envelope.flatten`` gives them to a relay:
        each header field ``name: value`` with CRLF line ends, an empty line, the body. Folding
        is kept as stored (slimta refolds long lines; a search unfolds them anyway); raw 8-bit
        header bytes are given back as they came, a header slimta set as UTF-8."""
        lines = [f"{name}: {value}" for name, value in self.headers]
        text = "".join(_LINE_ENDS.sub("\r\n", line) + "\r\n" for line in lines) + "\r\n"
        return _raw_bytes(text), self.body


@dataclass(frozen=True)
class MetaData:
    timestamp: float | None  # next delivery attempt
    attempts: int | None
    delivered_indexes: list[int] | None
    delivered_indexes_type: Literal["list", "set"] | None
    extra_keys: list[str]


def _text(value: Any, what: str, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise NotAnEnvelope(f"{what} is a {type(value).__name__}, not a str")
    return str.__str__(value)  # a plain str, also for HeaderValue/Terminal


def _number(value: Any, what: str, kind: type, error: type[SlimtaPickleError]) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, kind))):
        raise error(f"{what} is a {type(value).__name__}, not a number")
    return None if value is None else kind(value)


def _client_value(value: Any) -> str | None:
    scalars = (str, bytes, int, float)
    if value is None or isinstance(value, str):
        return None if value is None else str.__str__(value)
    if isinstance(value, scalars) or (  # auth is (authcid, authzid) from SmtpEdge
        type(value) in (tuple, list) and len(value) <= 8
        and all(v is None or isinstance(v, scalars) for v in value)
    ):  # fmt: skip
        with contextlib.suppress(ValueError):  # an int too long for str()
            return str(value)
    return f"<{type(value).__name__}>"


_LINE_ENDS = re.compile(r"\r\n|\r|\n")


def _raw_bytes(text: str) -> bytes:
    """`text` as the bytes it was read from (surrogate escapes back to their bytes), else
    UTF-8 with what cannot be encoded replaced."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _body(body: Any) -> bytes:
    """The stored body as bytes: a Python 2 str (loaded as latin1) back to its bytes."""
    if isinstance(body, str):
        if not body or max(body) <= "\xff":
            return body.encode("latin1")
        return _raw_bytes(body)
    return bytes(body or b"")


def _utf8_len(text: str) -> int:
    # BytesParser keeps undecodable header bytes as surrogate escapes: count the original bytes.
    try:
        return len(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return len(text.encode("utf-8", "surrogatepass"))


def decode_envelope(data: bytes, *, max_bytes: int = MAX_PICKLE_BYTES) -> EnvelopeData:
    """The fields of a pickled Envelope/Bounce (disk ``.env``, Redis ``envelope``, S3 body)."""
    obj, protocol = _load(data, max_bytes)
    if not isinstance(obj, Envelope):
        raise NotAnEnvelope(f"the pickle holds a {type(obj).__name__}, not a slimta Envelope")
    state = {**type(obj).defaults, **vars(obj)}  # older slimta may lack some attributes
    recipients, client, message = (state.get(k) for k in ("recipients", "client", "headers"))
    if type(recipients) not in (list, tuple, type(None)):
        raise NotAnEnvelope(f"recipients is a {type(recipients).__name__}, not a list")
    rcpts = [_text(r, f"recipient #{i}", False) or "" for i, r in enumerate(recipients or ())]
    if type(client) not in (dict, type(None)) or not all(isinstance(k, str) for k in client or {}):
        raise NotAnEnvelope(f"client is a {type(client).__name__}, not a dict of str keys")
    if message is not None and not isinstance(message, Message):
        raise NotAnEnvelope(f"headers is a {type(message).__name__}, not an email Message")
    raw = [] if message is None else vars(message).get("_headers", [])
    if type(raw) is not list or not all(type(p) in (tuple, list) and len(p) == 2 for p in raw):
        raise NotAnEnvelope("the headers list does not hold (name, value) pairs")
    headers = [(_text(n, f"header #{i} name", False) or "", _text(v, f"header #{i}", False) or "")
               for i, (n, v) in enumerate(raw)]  # fmt: skip
    body = state.get("message")
    if isinstance(body, str):  # a Python 2 str, loaded as latin1: one char per byte
        body_bytes = len(body) if not body or max(body) <= "\xff" else _utf8_len(body)
    elif isinstance(body, (bytes, bytearray)) or body is None:
        body_bytes = len(body or b"")
    else:
        raise NotAnEnvelope(f"message is a {type(body).__name__}, not bytes")
    sender = _text(state.get("sender"), "sender")
    receiver = _text(state.get("receiver"), "receiver")
    client_text = {str.__str__(k): _client_value(v) for k, v in (client or {}).items()}
    # One memoized string can be referenced a million times: refuse output the input can't hold.
    texts = [*rcpts, *client_text.values(), sender, receiver, *(s for h in headers for s in h)]
    size = sum(len(t or "") for t in texts)
    if size > 4 * len(data) + (64 << 10):
        raise PickleRejected([], f"decoded text ({size} chars) is far larger than the pickle")
    ids = [v for n, v in headers if n.lower() == "message-id"]
    header_bytes = 2 + sum(_utf8_len(n) + _utf8_len(v) + 4 for n, v in headers)
    header_bytes = 0 if message is None else header_bytes
    return EnvelopeData(
        sender=sender,
        recipients=rcpts,
        client=client_text,
        receiver=receiver,
        timestamp=_number(state.get("timestamp"), "timestamp", float, NotAnEnvelope),
        headers=headers,
        body_bytes=body_bytes,
        message_bytes=body_bytes + header_bytes,
        is_bounce=type(obj).is_bounce,
        message_id=ids[0] if ids else None,
        pickle_protocol=protocol,
        body=_body(body),
    )


def _indexes(value: Any) -> tuple[list[int], Literal["list", "set"]]:
    if type(value) not in (list, set, frozenset) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise NotAMeta(f"delivered_indexes is a {type(value).__name__}, not a list or set of ints")
    return (list(value), "list") if type(value) is list else (sorted(value), "set")


def decode_meta(data: bytes, *, max_bytes: int = MAX_PICKLE_BYTES) -> MetaData:
    """A DiskStorage ``.meta`` dict: next-attempt timestamp, attempts, delivered indexes."""
    meta = safe_loads(data, max_bytes=max_bytes)
    if type(meta) is not dict:
        raise NotAMeta(f"the pickle holds a {type(meta).__name__}, not a dict")
    indexes = meta.get("delivered_indexes")
    listed, kind = _indexes(indexes) if indexes is not None else (None, None)
    keys = [_clip(k) if isinstance(k, str) else f"<{type(k).__name__}>" for k in meta]
    return MetaData(
        timestamp=_number(meta.get("timestamp"), "timestamp", float, NotAMeta),
        attempts=_number(meta.get("attempts"), "attempts", int, NotAMeta),
        delivered_indexes=listed,
        delivered_indexes_type=kind,
        extra_keys=sorted(set(keys) - {"timestamp", "attempts", "delivered_indexes"}),
    )


def decode_delivered_indexes(
    data: bytes, *, max_bytes: int = MAX_PICKLE_BYTES
) -> tuple[list[int], Literal["list", "set"]]:
    """RedisStorage's ``delivered_indexes`` field: a pickled list, or the set `Queue` passes."""
    return _indexes(safe_loads(data, max_bytes=max_bytes))


def decode_queue_entry(data: bytes, *, max_bytes: int = MAX_PICKLE_BYTES) -> tuple[float, str]:
    """An item of RedisStorage's ``<prefix>queue`` list, ``(timestamp, id)``; else NotAMeta."""
    entry = safe_loads(data, max_bytes=max_bytes)
    if type(entry) is not tuple or len(entry) != 2 or type(entry[1]) is not str:
        raise NotAMeta(f"the pickle holds a {type(entry).__name__}, not a (timestamp, id) pair")
    if entry[0] is None:
        raise NotAMeta("the queue entry has no timestamp")
    return _number(entry[0], "queue timestamp", float, NotAMeta), entry[1]
