// Helpers for fork + exec shared by netemu::Process and gravacrun's Child: the child's
// environment (the parent's with overrides) and argv/envp arrays for execve.
//
//   std::vector<std::string> env = ChildEnvironment({{"GRAVAC_RANK", "3"}});
//   std::vector<char*> envp = ExecStrings(env);  // valid while `env` lives and is unchanged
//
// Thread-safety: ChildEnvironment reads `environ` (callers must not setenv concurrently); the
// others are pure.
#ifndef GRAVAC_NETEMU_EXEC_ARGS_H_
#define GRAVAC_NETEMU_EXEC_ARGS_H_

#include <string>
#include <utility>
#include <vector>

namespace gravac::netemu {

// The process environment as "KEY=VALUE" strings, sorted by key, with `overrides` replacing or
// adding variables (a later override of the same key wins).
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides);

// Pointers into `strings` followed by nullptr, as execve wants them.
std::vector<char*> ExecStrings(std::vector<std::string>& strings);

// Closes `fd` when it is open and sets it to -1.
void CloseFd(int& fd);

}  // namespace gravac::netemu

#endif  // GRAVAC_NETEMU_EXEC_ARGS_H_
