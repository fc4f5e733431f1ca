"""ModuleDict, ParameterList and ParameterDict, as PyTorch's: their entries
are registered children or parameters (so parameters(), state_dict() and
hybridize see them), under their keys or positions."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kiln._C import Tensor
from kiln.nn.module import Module
from kiln.nn.parameter import Parameter


def _as_parameter(value: Any) -> Parameter:
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value)  # as PyTorch: a plain tensor becomes a Parameter
    raise TypeError(f"cannot assign '{type(value).__name__}' as a parameter "
                    "(kiln.nn.Parameter or kiln.Tensor expected)")


def _pairs(values: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> Iterable[tuple[str, Any]]:
    return values.items() if isinstance(values, Mapping) else values


class ModuleDict(Module):
    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None
                 ) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]  # type: ignore[return-value]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()  # type: ignore[return-value]

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()  # type: ignore[return-value]

    def pop(self, key: str) -> Module:
        module = self[key]
        del self[key]
        return module

    def clear(self) -> None:
        for key in list(self._modules):
            del self[key]

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        for key, module in _pairs(modules):
            self[key] = module


class ParameterList(Module):
    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        for value in values or []:
            self.append(value)

    def __getitem__(self, index: int) -> Parameter:
        return list(self._parameters.values())[index]  # type: ignore[return-value]

    def __setitem__(self, index: int, value: Any) -> None:
        key = list(self._parameters)[index]
        self.register_parameter(key, _as_parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())  # type: ignore[arg-type]

    def append(self, value: Any) -> ParameterList:
        self.register_parameter(str(len(self._parameters)), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({i}): Parameter containing: [{p.dtype} of size {list(p.shape)}]"
                         for i, p in enumerate(self))


class ParameterDict(Module):
    def __init__(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None
                 ) -> None:
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Parameter:
        return self._parameters[key]  # type: ignore[return-value]

    def __setitem__(self, key: str, value: Any) -> None:
        self.register_parameter(key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __contains__(self, key: object) -> bool:
        return key in self._parameters

    def keys(self) -> Iterable[str]:
        return self._parameters.keys()

    def values(self) -> Iterable[Parameter]:
        return self._parameters.values()  # type: ignore[return-value]

    def items(self) -> Iterable[tuple[str, Parameter]]:
        return self._parameters.items()  # type: ignore[return-value]

    def update(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        for key, value in _pairs(parameters):
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{p.dtype} of size {list(p.shape)}]"
                         for k, p in self.items())
