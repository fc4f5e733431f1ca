"""Functions the kiln.jit.script tests script: the same programs eagerly,
compiled and in the error tests."""
import kiln


def branch(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = -x
    return y + 1


def chain(x):
    total = x.sum()
    if total > 2:
        y = x * 3
    elif total > 0:
        y = x + 10
    elif total > -2:
        y = x - 10
    else:
        y = x * 0
    return y


def nested(x, y):
    out = x
    if x.sum() > 0:
        if y.sum() > 0:
            out = x + y
        else:
            out = x - y
            if (x * y).sum() < -1:
                out = out * 2
    elif y.max() > 1:
        out = y
    return out


def rows(t):
    acc = kiln.zeros(t.shape[1])
    for row in t:
        acc = acc * 0.5 + row
    return acc


def logic(x, y):
    if x.sum() > 0 and y.sum() > 0 or not x.max() < 2:
        z = x + y
    else:
        z = x - y
    return z * 2 if z.sum() > 1 else z * 3


def until_negative(t):
    acc = kiln.zeros(t.shape[1])
    for row in t:
        if row.sum() < 0:
            break
        acc = acc + row
    else:
        acc = acc * 100  # no break
    return acc
