"""The one adapter between lazykern and numba-cuda's internals.

Everything lazykern borrows from numba-cuda that is not public API lives in this package, and so do
all the patches lazykern applies to Numba (``tests/test_numba_adapter.py`` checks each borrowed name
against the installed numba-cuda and names the one that moved; an import-linter contract forbids
private numba-cuda imports anywhere else). The surface the rest of the package calls:

- :mod:`.internals` (low layer, imports nothing from lazykern): the simulator switch, Numba's
  context, nvJitLink / libNVVM versions, ``typeof`` and signatures, device arrays built without
  Numba's constructor, and the capture guards' patch targets with :func:`~.internals.patch`.
- :mod:`.signature`: kernel signatures spelled by the user, relaxed to any layout.
- :mod:`.declared`: declared signatures (``lazy_kernel(sig)``): which one a launch runs and its
  arguments converted to it, as numba-cuda chooses and converts.
- :mod:`.args`: how arguments become a Numba kernel's parameters (launch plans, packers).
- :mod:`.key`: the first key of a ``@lazy_kernel`` (bytecode and everything it reaches).
- :mod:`.resolved`: the manifest of what Numba resolved while compiling (functions, frozen
  constants, line table), recorded at compile time and verified on every load.
- :mod:`.registries` / :mod:`.registered`: every registry Numba keeps, walked for the user's
  registrations, and those that apply to a compile's types and callables (in the manifest).
- :mod:`.compile`: one instantiation to a cubin for any arch, with no GPU.
- :mod:`.debug`: ``debug=True`` kernels' exception table (stored with the cubin) and the error
  code a launch reads back, as numba-cuda raises it.

Nothing is imported here: ``import lazykern`` must not import Numba.
"""

# Every private numba-cuda object the adapter reaches, as "module:attribute.path", with what it is
# used for. tests/test_numba_adapter.py resolves each against the installed numba-cuda.
BORROWED: dict[str, str] = {
    "numba.cuda.core.config:ENABLE_CUDASIM": "the simulator switch",
    "numba.cuda.core.config:CUDA_NVRTC_EXTRA_SEARCH_PATHS": "NVRTC search path of linked .cu files (key)",
    "numba.cuda.utils:cached_file_read": "linked files' reads, forgotten before each compile (edits must show)",
    "numba.cuda.core.sigutils:normalize_signature": "kernel signatures",
    "numba.cuda.core.sigutils:is_signature": "lazy_kernel(sig) / lazy_kernel([sig, ...]) as cuda.jit takes them",
    "numba.cuda.core.compiler_lock:global_compiler_lock": "the lock held while device functions are swapped",
    "numba.cuda.core.ir:Global": "frozen globals in the typed IR (manifest)",
    "numba.cuda.core.ir:FreeVar": "frozen closure values in the typed IR (manifest)",
    "numba.cuda.core.ir:Const": "frozen constants in the typed IR (manifest)",
    "numba.cuda.typing.typeof:typeof": "typing host arguments",
    "numba.cuda.np.numpy_support:from_dtype": "typing scalars and CUDA-array-interface arrays",
    "numba.cuda.cudadrv.devices:get_context": "Numba's context of the current device",
    "numba.cuda.cudadrv.driver:_have_nvjitlink": "the default of lto=",
    "numba.cuda.cudadrv.driver:MemoryPointer": "device arrays over lazykern's pool memory",
    "numba.cuda.cudadrv.devicearray:DeviceNDArray": "device arrays built without the constructor",
    "numba.cuda.cudadrv.devicearray:DeviceNDArrayBase.copy_to_host": "capture guard on synchronous copies",
    "numba.cuda.cudadrv.devicearray:DeviceNDArrayBase.copy_to_device": "capture guard on synchronous copies",
    "numba.cuda.cudadrv.dummyarray:Array.from_desc": "the shape/strides record of a device array",
    "numba.cuda.cudadrv.nvvm:NVVM": "libNVVM's version (key)",
    "numba.cuda.cudadrv.nvvm:set_launch_bounds": "launch_bounds= on a compiled kernel",
    "numba.cuda.cudadrv.nvrtc:__file__": "numba-cuda's package directory (include dirs, reshape_funcs.cu)",
    "numba.cuda.compiler:compile_cuda": "typing and lowering one instantiation",
    "numba.cuda.codegen:disassemble_cubin": "inspect_sass: a stored cubin's SASS (nvdisasm)",
    "numba.cuda.dispatcher:CUDADispatcher.add_overload": "declared signatures: stand-ins numba picks among",
    "numba.cuda.dispatcher:CUDADispatcher.disable_compile": "declared signatures: the chooser never compiles",
    "numba.cuda.dispatcher:_dispatcher.Dispatcher._cuda_call": "declared signatures: numba's choice for a launch",
    "numba.cuda.dispatcher:_LAUNCH_CONFIG_KW": "declared signatures: the keyword _cuda_call takes",
    "numba.cuda.compiler:kernel_fixup": "turning the lowered function into a kernel",
    "numba.cuda.dispatcher:get_current_device": "swapped for the target arch while compiling",
    "numba.cuda.dispatcher:CUDADispatcher.compile_device": "device functions compiled per target arch",
    "numba.cuda.dispatcher:CUDADispatcher.call": "capture guard on @cuda.jit launches",
    "numba.cuda.dispatcher:_Kernel.NRT_functions": "refusing kernels that need Numba's runtime",
    "numba.cuda._internal.cuda_fp16:lto_warning_callback": "float16's linked shim: its setup callback only warns",
    "numba.cuda.descriptor:cuda_target.target_context.data_model_manager": "user types' struct models (packing)",
    "numba.cuda.descriptor:cuda_target.target_context.get_abi_sizeof": "the item size of arrays of user types",
    "numba.cuda.core.errors:NumbaInvalidConfigWarning": "debug=True with opt or lineinfo: warned as cuda.jit warns",
    "numba.cuda.args:ArgHint": "cuda.In / Out / InOut arguments",
    "numba.cuda.args:InOut": "cuda.InOut arguments (copied in and out)",
    "numba.cuda.core.callconv:_MinimalCallHelper": "debug=True: its .exceptions, code -> (class, args, location)",
    "numba.cuda.descriptor:cuda_target.target_context._defns": "files linked by cuda.declare_device (key)",
    "numba.cuda.types.ext_types:CUDADispatcher": "device functions a kernel resolved (manifest)",
    # registries.py walks every registry the compile's contexts consulted (issue 43.4): it reads
    # their lists, handler tables and dispatch tables by shape, these names only to find them
    "numba.cuda.descriptor:cuda_target.typing_context._registries": "typing registries a compile consulted",
    "numba.cuda.descriptor:cuda_target.target_context._registries": "lowering registries a compile consulted",
    "numba.cuda.descriptor:cuda_target.target_context.data_model_manager._handlers.maps": "data model tables",
    "numba.cuda.models:cuda_data_manager._handlers": "a data model manager's handler table (type class -> model)",
    "numba.cuda.typing.typeof:typeof_impl.registry": "typeof's dispatch table (class -> implementation)",
    "numba.cuda.typing.templates:builtin_registry.globals": "a typing registry's lists (walked as a whole)",
    "numba.cuda.core.imputils:Registry": "lowering registries, told by class name (a later one is walked too)",
    "numba.cuda.typing.templates:FunctionTemplate": "lowerings typing registers from a template are the template's",
    "numba.cuda.typing.templates:AttributeTemplate": "lowerings typing registers from a template are the template's",
    "numba.cuda.descriptor:cuda_target._typingctx": "registries a user installed into the typing context (manifest)",
    "numba.cuda.descriptor:cuda_target._targetctx": "registries a user installed into the target context (manifest)",
    "numba.cuda.simulator.kernel:FakeCUDAKernel.__getitem__": "capture of simulator launches",
    "numba.cuda.simulator.cudadrv.devicearray:FakeCUDAArray": "capture guard on simulator copies",
    # Attributes of Numba objects that other modules reach through public ones (cuda.gpus[i], contexts):
    "numba.cuda.cudadrv.driver:Device.get_primary_context": "_device.primary_context (no import)",
    "numba.cuda.cudadrv.driver:Context.defer_cleanup": "graph.py keeps frees out of a capture (no import)",
    # One owner per CUlibrary (issue 45): Numba's module finalizer unloads the module's library per context.
    "numba.cuda.cudadrv.driver:Context.create_module_image": "patched: a second context loads a private copy",
    "numba.cuda.cudadrv.driver:_module_finalizer": "the per-context unload the patch keeps to one per library",
    "numba.cuda.cudadrv.driver:driver.devices": "the contexts Numba holds (the exit's shared-library check)",
}
