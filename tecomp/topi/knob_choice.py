"""Declaring a schedule's knobs on whatever config it is given, and reading their values.

The generated spaces (:mod:`.row_space`, :mod:`.injective_space`) declare knobs whose
first candidate is the untuned schedule. One schedule serves several templates (an
operator's own and the ``fused_group`` of a kernel it anchors), so the config it gets may
lack a knob that only another template declares: that knob keeps its first candidate.
"""

from __future__ import annotations


def declare_knobs(cfg, candidates: dict) -> dict:
    """Declare each ``name -> candidates`` knob on ``cfg`` and return the values ``cfg``
    chooses for the knobs it has.

    Parameters
    ----------
    cfg : ConfigSpace, ConfigEntity or FallbackConfigEntity
        The schedule's config (a space collects the knobs, an entity has chosen values,
        a fallback chooses each knob's first candidate).
    candidates : dict
        Knob name -> its candidates, the untuned choice first.

    Returns
    -------
    dict
        Knob name -> chosen value, for the knobs ``cfg`` has; a caller takes its default
        for the others.

    Examples
    --------
    >>> from tecomp.autotune import FallbackConfigEntity
    >>> declare_knobs(FallbackConfigEntity(), {"unroll": [1, 2, 4]})
    {'unroll': 1}
    """
    chosen = {}
    for name, values in candidates.items():
        cfg.define_knob(name, list(values))
        if name in cfg:
            chosen[name] = cfg[name].val
    return chosen
