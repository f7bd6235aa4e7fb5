use super::super::testutil::check_all;

#[test]
fn encode_matches_redis() {
    check_all(&[
        ("return cjson.encode({1,2,3})", "[1,2,3]"),
        ("return cjson.encode({})", "{}"),
        ("return cjson.encode({a=1})", "{\"a\":1}"),
        (
            "return cjson.encode('a/b\"c\\\\d\\n\\t\\1\\127\\200')",
            "\"a\\/b\\\"c\\\\d\\n\\t\\u0001\\u007f\u{fffd}\"",
        ),
        (
            "return cjson.encode(string.rep('x', 3) .. '\\0' .. 'y')",
            "\"xxx\\u0000y\"",
        ),
        ("return cjson.encode(true)", "true"),
        ("return cjson.encode(nil)", "null"),
        ("return cjson.encode(cjson.null)", "null"),
        ("return cjson.encode({cjson.null, nil, 3})", "[null,null,3]"),
        ("return cjson.encode({{{}}})", "[[{}]]"),
        (
            "return cjson.encode({a={b={1,2,{c=true}}}})",
            "{\"a\":{\"b\":[1,2,{\"c\":true}]}}",
        ),
        (
            "return cjson.encode({[1]={a={[1]=true}}})",
            "[{\"a\":[true]}]",
        ),
        ("return cjson.encode({[1]=1,a=2})", "{\"1\":1,\"a\":2}"),
        ("return cjson.encode({[1.5]=1})", "{\"1.5\":1}"),
        ("return cjson.encode({[-1]=1})", "{\"-1\":1}"),
        ("return cjson.encode({[0]=1})", "{\"0\":1}"),
        ("return cjson.encode({[2^31]=1})", "{\"2147483648\":1}"),
        ("return cjson.encode({[1e300]=1, [2]=2})", "[null,2]"),
        (
            "return cjson.encode({[3]=1, [2^40]=2})",
            "{\"3\":1,\"1099511627776\":2}",
        ),
    ]);
}

#[test]
fn encode_numbers_match_redis() {
    check_all(&[
        ("return cjson.encode(1/3)", "0.33333333333333"),
        ("return cjson.encode(1e15)", "1e+15"),
        ("return cjson.encode(1e14)", "1e+14"),
        ("return cjson.encode(123456789012345)", "1.2345678901234e+14"),
        ("return cjson.encode(12345678901234)", "12345678901234"),
        ("return cjson.encode(-0.0)", "-0"),
        ("return cjson.encode(0.1)", "0.1"),
        ("return cjson.encode(1e-5)", "1e-05"),
        ("return cjson.encode(0.0001)", "0.0001"),
        ("return cjson.encode(2^53)", "9.007199254741e+15"),
        ("return cjson.encode(-1.5e300)", "-1.5e+300"),
        ("return cjson.encode(1e-300)", "1e-300"),
        ("return cjson.encode(123.456)", "123.456"),
        ("return cjson.encode(-1e-7)", "-1e-07"),
        ("return cjson.encode(5e-324)", "4.9406564584125e-324"),
        ("return cjson.encode(1.7976931348623157e308)", "1.7976931348623e+308"),
        ("return cjson.encode(99999999999999.5)", "1e+14"),
        ("return cjson.encode(0.000012345678901234567)", "1.2345678901235e-05"),
        ("cjson.encode_number_precision(3) return cjson.encode({1/3, 1234.5, 100})", "[0.333,1.23e+03,100]"),
        ("local c = cjson.new() c.encode_number_precision(2) return cjson.encode(1/3) .. ' ' .. c.encode(1/3)", "0.33333333333333 0.33"),
        ("cjson.encode_invalid_numbers(true) return cjson.encode({1/0, -1/0, 0/0})", "[inf,-inf,nan]"),
        ("cjson.encode_invalid_numbers('null') return cjson.encode({1/0, 0/0, [1/0]=1})", "{\"1\":null,\"2\":null,\"null\":1}"),
        ("cjson.encode_invalid_numbers(true) return cjson.encode({[1/0]=1,a=1})", "{\"inf\":1,\"a\":1}"),
    ]);
}

#[test]
fn encode_errors_and_sparse_arrays_match_redis() {
    check_all(&[
        ("return cjson.encode(1/0)", "ERR:user_script:1: Cannot serialise number: must not be NaN or Inf"),
        ("return cjson.encode(0/0)", "ERR:user_script:1: Cannot serialise number: must not be NaN or Inf"),
        ("return cjson.encode({[1/0]=1})", "ERR:user_script:1: Cannot serialise number: must not be NaN or Inf"),
        ("return cjson.encode({[1]=1,[2]=2,[4]=4})", "[1,2,null,4]"),
        ("return cjson.encode({[1]=1,[20]=2})", "ERR:user_script:1: Cannot serialise table: excessively sparse array"),
        ("return cjson.encode({[11]=1})", "ERR:user_script:1: Cannot serialise table: excessively sparse array"),
        ("return cjson.encode({[10]=1})", "[null,null,null,null,null,null,null,null,null,1]"),
        ("local t = {} for i=1,20 do t[i]=i end t[25]=1 return cjson.encode(t)", "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,null,null,null,null,1]"),
        ("local t = {} for i=1,10 do t[i]=i end t[21]=1 return cjson.encode(t)", "[1,2,3,4,5,6,7,8,9,10,null,null,null,null,null,null,null,null,null,null,1]"),
        ("cjson.encode_sparse_array(true) return cjson.encode({[1]=1,[20]=2})", "{\"1\":1,\"20\":2}"),
        ("cjson.encode_sparse_array(false, 0) return cjson.encode({[1]=1,[5]=2})", "[1,null,null,null,2]"),
        ("return cjson.encode({[true]=1})", "ERR:user_script:1: Cannot serialise boolean: table key must be a number or string"),
        ("return cjson.encode({[type]=1})", "ERR:user_script:1: Cannot serialise function: table key must be a number or string"),
        ("return cjson.encode({f=type})", "ERR:user_script:1: Cannot serialise function: type not supported"),
        ("return cjson.encode(cjson.encode)", "ERR:user_script:1: Cannot serialise function: type not supported"),
        ("return cjson.encode()", "ERR:user_script:1: bad argument #1 to 'encode' (expected 1 argument)"),
        ("return cjson.encode(1,2)", "ERR:user_script:1: bad argument #1 to 'encode' (expected 1 argument)"),
        ("local t = {} t[1] = t return cjson.encode(t)", "ERR:user_script:1: Cannot serialise, excessive nesting (1001)"),
        ("cjson.encode_max_depth(2) return cjson.encode({{{1}}})", "ERR:user_script:1: Cannot serialise, excessive nesting (3)"),
        (
            "cjson.encode_max_depth(100000) local t = {} local c = t for i=1,9000 do c[1] = {} c = c[1] end return select(2, pcall(cjson.encode, t))",
            "Cannot serialise, excessive nesting (7998)",
        ),
        (
            "cjson.encode_max_depth(100000) local t = {} local c = t for i=1,9000 do c.a = {} c = c.a end return select(2, pcall(cjson.encode, t))",
            "Cannot serialise, excessive nesting (4000)",
        ),
    ]);
}

#[test]
fn decode_matches_redis() {
    check_all(&[
        ("return cjson.decode('\"\\\\ud83d\\\\ude00\"')", "\u{1f600}"),
        ("return cjson.decode('\"\\\\u00e9\\\\/\\\\b\"')", "\u{e9}/\u{8}"),
        ("return cjson.decode('\"a\\tb\"')", "a\tb"),
        ("return tostring(cjson.decode('0x10'))", "16"),
        ("return tostring(cjson.decode('-0x1p3'))", "-8"),
        ("return tostring(cjson.decode('+5'))", "5"),
        ("return tostring(cjson.decode('NaN'))", "nan"),
        ("return tostring(cjson.decode('-nan'))", "-nan"),
        ("return tostring(cjson.decode('Infinity'))", "inf"),
        ("return tostring(cjson.decode('-inf'))", "-inf"),
        ("return tostring(cjson.decode('1e400'))", "inf"),
        ("return tostring(cjson.decode('007'))", "7"),
        ("return tostring(cjson.decode('1.'))", "1"),
        ("return tostring(cjson.decode(' 1.5e3 '))", "1500"),
        ("return tostring(cjson.decode('12\\0xyz'))", "12"),
        ("return tostring(cjson.decode(12))", "12"),
        ("return cjson.decode('[1,2,{\"a\":[true,false,null]}]')[3].a[3] == cjson.null and 'yes' or 'no'", "yes"),
        ("return cjson.encode(cjson.decode('{\"a\":[1,2.5,\"x\"],\"b\":{}}'))", "{\"a\":[1,2.5,\"x\"],\"b\":{}}"),
        ("return cjson.decode('[[[[1]]]]')[1][1][1][1]", "1"),
        ("return type(cjson.null) .. tostring(cjson.null == nil)", "userdatafalse"),
        ("return cjson._NAME .. ' ' .. cjson._VERSION", "cjson 2.1.0"),
    ]);
}

#[test]
fn decode_errors_match_redis() {
    let e = |m: &str| format!("ERR:user_script:1: {m}");
    let cases: Vec<(&str, String)> = vec![
        (
            "return cjson.decode('{')",
            e("Expected object key string but found T_END at character 2"),
        ),
        (
            "return cjson.decode('[1,2')",
            e("Expected comma or array end but found T_END at character 5"),
        ),
        (
            "return cjson.decode('[1,]')",
            e("Expected value but found T_ARR_END at character 4"),
        ),
        (
            "return cjson.decode('{\"a\" 1}')",
            e("Expected colon but found T_NUMBER at character 6"),
        ),
        (
            "return cjson.decode('{1:2}')",
            e("Expected object key string but found T_NUMBER at character 2"),
        ),
        (
            "return cjson.decode('[1 2]')",
            e("Expected comma or array end but found T_NUMBER at character 4"),
        ),
        (
            "return cjson.decode('{\"a\":1 \"b\"}')",
            e("Expected comma or object end but found T_STRING at character 8"),
        ),
        (
            "return cjson.decode('')",
            e("Expected value but found T_END at character 1"),
        ),
        (
            "return cjson.decode('  ')",
            e("Expected value but found T_END at character 3"),
        ),
        (
            "return cjson.decode('1 2')",
            e("Expected the end but found T_NUMBER at character 3"),
        ),
        (
            "return cjson.decode('\"abc')",
            e("Expected value but found unexpected end of string at character 5"),
        ),
        (
            "return cjson.decode('\"a\\\\qb\"')",
            e("Expected value but found invalid escape code at character 3"),
        ),
        (
            "return cjson.decode('\"\\\\u12\"')",
            e("Expected value but found invalid unicode escape code at character 2"),
        ),
        (
            "return cjson.decode('\"\\\\ud800\"')",
            e("Expected value but found invalid unicode escape code at character 2"),
        ),
        (
            "return cjson.decode('\"\\\\udc00\\\\u0041\"')",
            e("Expected value but found invalid unicode escape code at character 2"),
        ),
        (
            "return cjson.decode('nul')",
            e("Expected value but found invalid token at character 1"),
        ),
        (
            "return cjson.decode('x')",
            e("Expected value but found invalid token at character 1"),
        ),
        (
            "return cjson.decode('-')",
            e("Expected value but found invalid number at character 1"),
        ),
        (
            "return cjson.decode('.5')",
            e("Expected value but found invalid token at character 1"),
        ),
        (
            "return cjson.decode('info')",
            e("Expected the end but found invalid token at character 4"),
        ),
        (
            "return cjson.decode('0x')",
            e("Expected the end but found invalid token at character 2"),
        ),
        (
            "return cjson.decode('1e')",
            e("Expected the end but found invalid token at character 2"),
        ),
        (
            "return cjson.decode('1e+')",
            e("Expected the end but found invalid token at character 2"),
        ),
        (
            "return cjson.decode('I')",
            e("Expected value but found invalid token at character 1"),
        ),
        (
            "return cjson.decode('nan(abc)x')",
            e("Expected the end but found invalid token at character 9"),
        ),
        (
            "return cjson.decode('\\0\\0')",
            e("JSON parser does not support UTF-16 or UTF-32"),
        ),
        (
            "return cjson.decode('1\\0xyz')",
            e("JSON parser does not support UTF-16 or UTF-32"),
        ),
        (
            "return cjson.decode()",
            e("bad argument #1 to 'decode' (expected 1 argument)"),
        ),
        (
            "return cjson.decode({})",
            e("bad argument #1 to 'decode' (string expected, got table)"),
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('0x10')",
            e("Expected value but found invalid number at character 1"),
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('NaN')",
            e("Expected value but found invalid token at character 1"),
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('+1')",
            e("Expected value but found invalid token at character 1"),
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('[01]')",
            e("Expected value but found invalid number at character 2"),
        ),
        (
            "cjson.decode_invalid_numbers(false) return cjson.decode('-inf')",
            e("Expected value but found invalid number at character 1"),
        ),
        (
            "return cjson.decode(string.rep('[', 1001))",
            e("Found too many nested data structures (1001) at character 1001"),
        ),
        (
            "cjson.decode_max_depth(2) return cjson.decode('[[[1]]]')",
            e("Found too many nested data structures (3) at character 3"),
        ),
        (
            "cjson.decode_max_depth(100000) return cjson.decode(string.rep('[', 9000))",
            e("Found too many nested data structures (7999) at character 7999"),
        ),
        (
            "cjson.decode_max_depth(100000) return cjson.decode(string.rep('{\"a\":', 9000))",
            e("Found too many nested data structures (4000) at character 19996"),
        ),
        (
            "cjson.decode_max_depth(100000) local t = cjson.decode(string.rep('[', 7998) .. string.rep(']', 7998)) \
             cjson.encode_max_depth(100000) return cjson.encode(t)",
            e("Cannot serialise, excessive nesting (7998)"),
        ),
        (
            "cjson.decode_max_depth(100000) local t = cjson.decode(string.rep('{\"a\":', 3999) .. '1' .. string.rep('}', 3999)) \
             cjson.encode_max_depth(100000) return tostring(#cjson.encode(t))",
            "23995".to_string(),
        ),
        (
            "return select(2, pcall(cjson.decode, '{'))",
            "Expected object key string but found T_END at character 2".to_string(),
        ),
    ];
    let cases: Vec<(&str, &str)> = cases.iter().map(|(c, w)| (*c, w.as_str())).collect();
    check_all(&cases);
}

#[test]
fn configuration_matches_redis() {
    check_all(&[
        ("return cjson.encode({cjson.encode_sparse_array()})", "[false,2,10]"),
        ("return cjson.encode({cjson.encode_sparse_array(true, 3, 5)})", "[true,3,5]"),
        ("return cjson.encode({cjson.encode_sparse_array('on')})", "[true,2,10]"),
        ("return cjson.encode_sparse_array('yes')", "ERR:user_script:1: bad argument #1 to 'encode_sparse_array' (invalid option 'yes')"),
        ("return cjson.encode_sparse_array(1,2,3,4)", "ERR:user_script:1: bad argument #4 to 'encode_sparse_array' (found too many arguments)"),
        ("return cjson.encode_sparse_array(nil, -1)", "ERR:user_script:1: bad argument #1 to 'encode_sparse_array' (expected integer between 0 and 2147483647)"),
        ("return cjson.encode_sparse_array(nil, nil, 'x')", "ERR:user_script:1: bad argument #3 to 'encode_sparse_array' (number expected, got string)"),
        ("return cjson.encode_max_depth(0)", "ERR:user_script:1: bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)"),
        ("return cjson.encode_max_depth('5')", "5"),
        ("return cjson.encode_max_depth(2^32+3)", "3"),
        ("return cjson.encode_number_precision(15)", "ERR:user_script:1: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)"),
        ("return cjson.encode_number_precision(3)", "3"),
        ("return tostring(cjson.encode_keep_buffer(false))", "false"),
        ("return tostring(cjson.encode_keep_buffer())", "true"),
        ("return tostring(cjson.decode_invalid_numbers(false))", "false"),
        ("return tostring(cjson.encode_invalid_numbers(true))", "true"),
        ("return tostring(cjson.encode_invalid_numbers('off'))", "false"),
        ("return cjson.encode_invalid_numbers('null')", "null"),
        ("return cjson.encode_invalid_numbers(1)", "ERR:user_script:1: bad argument #1 to 'encode_invalid_numbers' (invalid option '1')"),
        ("return cjson.decode_max_depth(2)", "2"),
        ("return cjson:encode_max_depth()", "ERR:user_script:1: calling 'encode_max_depth' on bad self (number expected, got table)"),
    ]);
}

#[test]
fn strtod_prefixes() {
    use super::strtod;
    assert_eq!(strtod(b"0x1.8p1"), Some((3.0, 7)));
    assert_eq!(
        strtod(b"0x10000000000000001p0"),
        Some((18446744073709551616.0, 21))
    );
    assert_eq!(strtod(b"0x1p-1074"), Some((5e-324, 9)));
    assert_eq!(strtod(b"0x1p-1075"), Some((0.0, 9)));
    assert_eq!(strtod(b"0x1p1024").map(|(v, _)| v), Some(f64::INFINITY));
    assert_eq!(strtod(b"1e5x"), Some((100000.0, 3)));
    assert_eq!(strtod(b"-.5"), Some((-0.5, 3)));
    assert_eq!(strtod(b"-"), None);
    assert_eq!(strtod(b"e5"), None);
}
