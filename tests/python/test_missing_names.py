"""A name kiln lacks says which PyTorch feature is missing, never a bare
AttributeError with a "did you mean" guess."""
import pytest

import kiln


def test_missing_names_say_what_kiln_lacks():
    with pytest.raises(AttributeError, match=r"kiln does not implement torch\.special") as info:
        kiln.special  # noqa: B018
    assert "did you mean" not in str(info.value).lower()
    with pytest.raises(AttributeError, match=r"kiln does not implement torch\.Tensor\.stft"):
        kiln.ones(2).stft  # noqa: B018
    assert not hasattr(kiln.ones(2), "no_such_method")
    assert hasattr(kiln.ones(2), "sum")
    with pytest.raises(AttributeError, match="has no attribute '__wrapped__'$"):
        kiln.__wrapped__  # noqa: B018


def test_submodules_say_what_kiln_lacks():
    with pytest.raises(AttributeError, match=r"kiln does not implement torch\.nn\.LazyLinear"):
        kiln.nn.LazyLinear  # noqa: B018
    with pytest.raises(AttributeError,
                       match=r"kiln does not implement torch\.nn\.functional\.ctc_loss"):
        kiln.nn.functional.ctc_loss  # noqa: B018
    with pytest.raises(AttributeError, match=r"kiln does not implement torch\.optim\.LBFGS"):
        kiln.optim.LBFGS  # noqa: B018
    with pytest.raises(AttributeError,
                       match=r"kiln does not implement torch\.utils\.data\.IterableDataset"):
        kiln.utils.data.IterableDataset  # noqa: B018
    with pytest.raises(AttributeError,
                       match=r"kiln does not implement torch\.autograd\.forward_ad"):
        kiln.autograd.forward_ad  # noqa: B018
