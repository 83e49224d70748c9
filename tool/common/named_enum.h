// Enums stored or printed by name: one table of names each, read both ways, made from an X-macro list
// of the values (X(id): the value `id`, named "id"), so a misspelt value does not compile. E.g.
//   #define KEVO_COLOR_LIST(X) X(red) X(green)
//   enum class Color { KEVO_COLOR_LIST(KEVO_ENUM_VALUE) };
//   constexpr const char* kColorNames[] = {KEVO_COLOR_LIST(KEVO_ENUM_NAME)};
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#define KEVO_ENUM_VALUE(id) id,
#define KEVO_ENUM_NAME(id) #id,

// The verdicts on a candidate: evaluate's Status and the store's ProgramStatus (which starts with
// them) are both made from this one list, so a verdict is stored by the name it is printed with.
#define KEVO_VERDICT_LIST(X) X(ok) X(compile_error) X(runtime_error) X(mismatch) X(timeout) X(rejected) X(no_device)

namespace kevo {

template <class E, size_t N>
constexpr const char* enum_name(const char* const (&names)[N], E value) { return names[static_cast<size_t>(value)]; }

// The value of that name; none for a name not in the table.
template <class E, size_t N>
std::optional<E> enum_of_name(const char* const (&names)[N], std::string_view name) {
    for (size_t i = 0; i < N; ++i)
        if (name == names[i]) return static_cast<E>(i);
    return std::nullopt;
}

// "a, b or c": the names, for a message that lists them.
template <size_t N>
std::string enum_names_text(const char* const (&names)[N]) {
    std::string out;
    for (size_t i = 0; i < N; ++i) out += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i]);
    return out;
}

}  // namespace kevo
