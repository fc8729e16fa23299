"""Statement constructors whose encoding other passes read back."""

import pytest

from tecomp.ir import IntImm
from tecomp.ir import stmt as S
from tecomp.ir.buffer import make_buffer


@pytest.mark.parametrize("write, streaming", [(False, False), (True, False), (False, True)])
def test_a_prefetch_reads_back_its_kind(write, streaming):
    B = make_buffer("B", "float32", (16,))
    hint = S.prefetch(B, IntImm(4), write=write, streaming=streaming)
    assert S.prefetched(hint).buffer is B
    assert (S.prefetch_for_write(hint), S.prefetch_streaming(hint)) == (write, streaming)


def test_a_write_cannot_be_a_streaming_prefetch():
    B = make_buffer("B", "float32", (16,))
    with pytest.raises(ValueError, match="a streaming hint is for reads"):
        S.prefetch(B, IntImm(4), write=True, streaming=True)
