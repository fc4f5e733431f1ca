# Runs kiln-opt (KILN_OPT) over SCENARIOS.md's fancy_func and checks its
# output, its report, and its errors on bad input.
# cmake -DKILN_OPT=... -DPASS_TESTS=<tests/passes> -P kiln_opt_check.cmake

function(expect_contains text what)
  string(FIND "${text}" "${what}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${what}' in:\n${text}")
  endif()
endfunction()

function(expect_lacks text what)
  string(FIND "${text}" "${what}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "did not expect '${what}' in:\n${text}")
  endif()
endfunction()

execute_process(COMMAND ${KILN_OPT} --report ${PASS_TESTS}/constant_fold_fancy_func.ir
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln-opt failed (${rc}): ${err}")
endif()
expect_contains("${out}" "graph() {\n  %c0 : f32[1] = const [10]\n  return (%c0)\n}\n")
expect_lacks("${out}" "add(")
expect_contains("${out}" "# constant_fold")
expect_contains("${out}" "fold add")

# --passes: only dce runs, so the adds stay.
execute_process(COMMAND ${KILN_OPT} --passes=dce ${PASS_TESTS}/constant_fold_fancy_func.ir
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
expect_contains("${out}" "add(%0, %1)")

execute_process(COMMAND ${KILN_OPT} --help OUTPUT_VARIABLE out RESULT_VARIABLE rc)
expect_contains("${out}" "usage: kiln-opt")
expect_contains("${out}" "constant_fold")

# Bad input: a missing file, an unknown pass, text that does not parse.
foreach(args "${PASS_TESTS}/no_such_file.ir" "--passes=fold;${PASS_TESTS}/dce_chain.ir"
             "--frobnicate;${PASS_TESTS}/dce_chain.ir" "${PASS_TESTS}/kiln_opt_check.cmake")
  execute_process(COMMAND ${KILN_OPT} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  if(rc EQUAL 0)
    message(FATAL_ERROR "kiln-opt ${args} should fail")
  endif()
  expect_contains("${err}" "kiln-opt: error: ")
endforeach()
