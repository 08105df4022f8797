"""The PTX instructions Numba has no name for, each one line: its text, its result's type and
its operands' types (primitives_gpu.py wraps them as device functions).

``instruction(text, result, *operands)`` makes a Numba intrinsic that emits ``text`` as inline
PTX, ``$0`` its result (where it has one, ``result`` None where not) and ``$1``, ``$2``, ...
its operands in order. An operand's type gives its PTX register class: float32 ``f``,
uint32 ``r``, uint64 ``l``; ``ARRAY``, an array passed as the generic address of its first
element (``l``). ``effects``: the instruction reads or writes memory LLVM does not see (the
shared-memory accesses), so LLVM keeps it and its order among the others. Only the GPU
imports this module: the simulator has its own twins (primitives_sim.py).
"""
import inspect

from llvmlite import ir
from numba.cuda import types
from numba.cuda.extending import intrinsic

ARRAY = "array"
REGISTERS = {types.float32: (ir.FloatType(), "f"), types.uint32: (ir.IntType(32), "r"),
             types.uint64: (ir.IntType(64), "l"), ARRAY: (ir.IntType(64), "l")}


def instruction(text: str, result, *operands, effects: bool = False):
    """An intrinsic emitting the inline PTX ``text`` (see the module's docstring)."""
    llvm_result = ir.VoidType() if result is None else REGISTERS[result][0]
    function_type = ir.FunctionType(llvm_result, [REGISTERS[o][0] for o in operands])
    constraints = ",".join(([f"={REGISTERS[result][1]}"] if result is not None else [])
                           + [REGISTERS[o][1] for o in operands])
    asm = ir.InlineAsm(function_type, text, constraints, side_effect=effects)

    def codegen(context, builder, sig, args):
        values = [builder.ptrtoint(context.make_array(t)(context, builder, v).data, ir.IntType(64))
                  if o == ARRAY else v for o, t, v in zip(operands, sig.args, args)]
        out = builder.call(asm, values)
        return context.get_dummy_value() if result is None else out

    def typer(typingctx, *args):
        argument_types = [a if o == ARRAY else o for o, a in zip(operands, args)]
        return (types.void if result is None else result)(*argument_types), codegen

    # Numba names an intrinsic's parameters from its typing function's signature: one per operand.
    typer.__signature__ = inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                             for name in ("typingctx", *(f"a{i}" for i in range(len(operands))))])
    typer.__name__ = typer.__qualname__ = text.split()[0].replace(".", "_")
    return intrinsic(typer)


f32, u32 = types.float32, types.uint32

# Two fp32 rounded to nearest even into one 32-bit word of two 16-bit elements (sm_80 on): the
# first operand into the high half, the second into the low half.
cvt_bf16x2 = instruction("cvt.rn.bf16x2.f32 $0, $1, $2;", u32, f32, f32)
cvt_f16x2 = instruction("cvt.rn.f16x2.f32 $0, $1, $2;", u32, f32, f32)
# NaN if either is NaN, in one instruction (sm_80 on).
max_nan_f32 = instruction("max.NaN.f32 $0, $1, $2;", f32, f32, f32)
# 2^t, the hardware's approximation (2 ulp); .ftz flushes subnormal results to 0.
ex2_f32 = instruction("ex2.approx.f32 $0, $1;", f32, f32)
ex2_ftz_f32 = instruction("ex2.approx.ftz.f32 $0, $1;", f32, f32)
rcp_ftz_f32 = instruction("rcp.approx.ftz.f32 $0, $1;", f32, f32)
# The 32-bit shared-window offset of an array in shared memory (its first element's).
shared_offset = instruction("{ .reg .u64 t; cvta.to.shared.u64 t, $1; cvt.u32.u64 $0, t; }", u32, ARRAY)
ld_shared_f32 = instruction("ld.shared.f32 $0, [$1];", f32, u32, effects=True)
st_shared_f32 = instruction("st.shared.f32 [$0], $1;", None, u32, f32, effects=True)
