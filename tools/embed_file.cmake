# Writes a C++ source defining `const unsigned char NAME[]` (the bytes of IN, then a 0)
# and `const unsigned long NAME_size`. Run as: cmake -DIN=file -DOUT=file.cpp -DNAME=x -P this
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by tools/embed_file.cmake at build time; do not edit.\n"
  "extern const unsigned char ${NAME}[] = {\n${bytes}0x00};\n"
  "extern const unsigned long ${NAME}_size = ${n};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
