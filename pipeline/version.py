"""irpipe's version, at the ground floor: the package's front door, setup.cfg, recipe keys and checkpoints read it
from here, so no module imports the front door (pipeline/__init__.py) for it."""
__version__ = "0.1.0"
