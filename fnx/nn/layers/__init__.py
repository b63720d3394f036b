"""The layer modules of fnx.nn, one family per file."""
from . import (activation, adaptive, attention, conv, distance, dropout, embedding, flatten, fold, lazy, linear,
               loss, normalization, padding, pooling, resize, rnn, transformer)
from .activation import *  # noqa: F401,F403
from .adaptive import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .embedding import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .fold import *  # noqa: F401,F403
from .lazy import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .resize import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403

_FAMILIES = (activation, adaptive, attention, conv, distance, dropout, embedding, flatten, fold, lazy, linear, loss,
             normalization, padding, pooling, resize, rnn, transformer)
__all__ = [name for family in _FAMILIES for name in family.__all__]
