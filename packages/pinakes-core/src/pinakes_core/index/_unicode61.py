"""Where SQLite's ``unicode61`` reads a character otherwise than Python's tables.

Made by ``benchmarks/fts5_unicode.py`` from SQLite 3.40.1 and Python's Unicode 14.0.0
(do not edit): code points SQLite takes for token characters where Python's tables say
separator (mostly unassigned or newer ones), the reverse, and the characters it folds
otherwise (:mod:`pinakes_core.index.stemmer`).
"""

#: Token characters to SQLite, separators by Python's tables (a regex class body).
TOKEN_CHARS = (
    "\u0378-\u0379\u0380-\u0383\u038b\u038d\u03a2\u0530\u0557-\u0558\u058b-\u058e"
    "\u0590\u05c8-\u05cf\u05eb-\u05ee\u05f5-\u05ff\u0605\u061c-\u061d\u070e"
    "\u074b-\u074c\u07b2-\u07bf\u07fb-\u07ff\u082e-\u082f\u083f\u085c-\u085d\u085f"
    "\u086b-\u086f\u0888\u088f-\u089f\u08ca-\u08e3\u08ff\u0984\u098d-\u098e"
    "\u0991-\u0992\u09a9\u09b1\u09b3-\u09b5\u09ba-\u09bb\u09c5-\u09c6\u09c9-\u09ca"
    "\u09cf-\u09d6\u09d8-\u09db\u09de\u09e4-\u09e5\u09fd-\u0a00\u0a04\u0a0b-\u0a0e"
    "\u0a11-\u0a12\u0a29\u0a31\u0a34\u0a37\u0a3a-\u0a3b\u0a3d\u0a43-\u0a46"
    "\u0a49-\u0a4a\u0a4e-\u0a50\u0a52-\u0a58\u0a5d\u0a5f-\u0a65\u0a76-\u0a80\u0a84"
    "\u0a8e\u0a92\u0aa9\u0ab1\u0ab4\u0aba-\u0abb\u0ac6\u0aca\u0ace-\u0acf"
    "\u0ad1-\u0adf\u0ae4-\u0ae5\u0af2-\u0af8\u0afa-\u0b00\u0b04\u0b0d-\u0b0e"
    "\u0b11-\u0b12\u0b29\u0b31\u0b34\u0b3a-\u0b3b\u0b45-\u0b46\u0b49-\u0b4a"
    "\u0b4e-\u0b55\u0b58-\u0b5b\u0b5e\u0b64-\u0b65\u0b78-\u0b81\u0b84\u0b8b-\u0b8d"
    "\u0b91\u0b96-\u0b98\u0b9b\u0b9d\u0ba0-\u0ba2\u0ba5-\u0ba7\u0bab-\u0bad"
    "\u0bba-\u0bbd\u0bc3-\u0bc5\u0bc9\u0bce-\u0bcf\u0bd1-\u0bd6\u0bd8-\u0be5"
    "\u0bfb-\u0c00\u0c04\u0c0d\u0c11\u0c29\u0c3a-\u0c3c\u0c45\u0c49\u0c4e-\u0c54"
    "\u0c57\u0c5b-\u0c5c\u0c5e-\u0c5f\u0c64-\u0c65\u0c70-\u0c77\u0c81\u0c84\u0c8d"
    "\u0c91\u0ca9\u0cb4\u0cba-\u0cbb\u0cc5\u0cc9\u0cce-\u0cd4\u0cd7-\u0cdc\u0cdf"
    "\u0ce4-\u0ce5\u0cf0\u0cf3-\u0d01\u0d0d\u0d11\u0d3b-\u0d3c\u0d45\u0d49"
    "\u0d4f-\u0d53\u0d64-\u0d65\u0d80-\u0d81\u0d84\u0d97-\u0d99\u0db2\u0dbc"
    "\u0dbe-\u0dbf\u0dc7-\u0dc9\u0dcb-\u0dce\u0dd5\u0dd7\u0de0-\u0de5\u0df0-\u0df1"
    "\u0df5-\u0e00\u0e3b-\u0e3e\u0e5c-\u0e80\u0e83\u0e85\u0e8b\u0ea4\u0ea6\u0eba"
    "\u0ebe-\u0ebf\u0ec5\u0ec7\u0ece-\u0ecf\u0eda-\u0edb\u0ee0-\u0eff\u0f48"
    "\u0f6d-\u0f70\u0f98\u0fbd\u0fcd\u0fdb-\u0fff\u10c6\u10c8-\u10cc\u10ce-\u10cf"
    "\u1249\u124e-\u124f\u1257\u1259\u125e-\u125f\u1289\u128e-\u128f\u12b1"
    "\u12b6-\u12b7\u12bf\u12c1\u12c6-\u12c7\u12d7\u1311\u1316-\u1317\u135b-\u135c"
    "\u137d-\u137f\u139a-\u139f\u13f6-\u13f7\u13fe-\u13ff\u169d-\u169f\u16f9-\u16ff"
    "\u1715-\u171e\u1737-\u173f\u1754-\u175f\u176d\u1771\u1774-\u177f\u17de-\u17df"
    "\u17ea-\u17ef\u17fa-\u17ff\u180f\u181a-\u181f\u1879-\u187f\u1885-\u1886"
    "\u18ab-\u18af\u18f6-\u18ff\u191f\u192c-\u192f\u193c-\u193f\u1941-\u1943"
    "\u196e-\u196f\u1975-\u197f\u19ac-\u19af\u19ca-\u19cf\u19db-\u19dd\u1a1c-\u1a1d"
    "\u1a5f\u1a7d-\u1a7e\u1a8a-\u1a8f\u1a9a-\u1a9f\u1aae-\u1aff\u1b4d-\u1b4f"
    "\u1b7d-\u1b7f\u1bf4-\u1bfb\u1c38-\u1c3a\u1c4a-\u1c4c\u1c89-\u1c8f\u1cbb-\u1cbc"
    "\u1cc8-\u1ccf\u1cf7-\u1cf9\u1cfb-\u1cff\u1de7-\u1dfb\u1f16-\u1f17\u1f1e-\u1f1f"
    "\u1f46-\u1f47\u1f4e-\u1f4f\u1f58\u1f5a\u1f5c\u1f5e\u1f7e-\u1f7f\u1fb5\u1fc5"
    "\u1fd4-\u1fd5\u1fdc\u1ff0-\u1ff1\u1ff5\u1fff\u2065-\u2069\u2072-\u2073\u208f"
    "\u209d-\u209f\u20ba-\u20cf\u20f1-\u20ff\u218a-\u218f\u23f4-\u23ff\u2427-\u243f"
    "\u244b-\u245f\u2700\u2b4d-\u2b4f\u2b5a-\u2bff\u2cf4-\u2cf8\u2d26\u2d28-\u2d2c"
    "\u2d2e-\u2d2f\u2d68-\u2d6e\u2d71-\u2d7e\u2d97-\u2d9f\u2da7\u2daf\u2db7\u2dbf"
    "\u2dc7\u2dcf\u2dd7\u2ddf\u2e3c-\u2e7f\u2e9a\u2ef4-\u2eff\u2fd6-\u2fef"
    "\u2ffc-\u2fff\u3040\u3097-\u3098\u3100-\u3104\u3130\u318f\u31e4-\u31ef\u321f"
    "\u32ff\ua48d-\ua48f\ua4c7-\ua4cf\ua62c-\ua63f\ua69e\ua6f8-\ua6ff\ua7cb-\ua7cf"
    "\ua7d2\ua7d4\ua7da-\ua7f1\ua82c-\ua82f\ua83a-\ua83f\ua878-\ua87f\ua8c5-\ua8cd"
    "\ua8da-\ua8df\ua8fc\ua8ff\ua954-\ua95e\ua97d-\ua97f\ua9ce\ua9da-\ua9dd\ua9e5"
    "\ua9ff\uaa37-\uaa3f\uaa4e-\uaa4f\uaa5a-\uaa5b\uaa7c-\uaa7d\uaac3-\uaada"
    "\uaaf7-\uab00\uab07-\uab08\uab0f-\uab10\uab17-\uab1f\uab27\uab2f\uab5b"
    "\uab6a-\uab6f\uabee-\uabef\uabfa-\uabff\ud7a4-\ud7af\ud7c7-\ud7ca\ud7fc-\ud7ff"
    "\ue000-\uf8ff\ufa6e-\ufa6f\ufada-\ufaff\ufb07-\ufb12\ufb18-\ufb1c\ufb37\ufb3d"
    "\ufb3f\ufb42\ufb45\ufbc2-\ufbd2\ufd40-\ufd4f\ufd90-\ufd91\ufdc8-\ufdef"
    "\ufdfe-\ufdff\ufe1a-\ufe1f\ufe27-\ufe2f\ufe53\ufe67\ufe6c-\ufe6f\ufe75"
    "\ufefd-\ufefe\uff00\uffbf-\uffc1\uffc8-\uffc9\uffd0-\uffd1\uffd8-\uffd9"
    "\uffdd-\uffdf\uffe7\uffef-\ufff8\U0001000c\U00010027\U0001003b\U0001003e"
    "\U0001004e-\U0001004f\U0001005e-\U0001007f\U000100fb-\U000100ff"
    "\U00010103-\U00010106\U00010134-\U00010136\U0001018c-\U0001018f"
    "\U0001019c-\U000101cf\U000101fe-\U0001027f\U0001029d-\U0001029f"
    "\U000102d1-\U000102e0\U000102fc-\U000102ff\U00010324-\U0001032c"
    "\U0001034b-\U0001034f\U00010376-\U0001037f\U0001039e\U000103c4-\U000103c7"
    "\U000103d6-\U000103ff\U0001049e-\U0001049f\U000104aa-\U000104af"
    "\U000104d4-\U000104d7\U000104fc-\U000104ff\U00010528-\U0001052f"
    "\U00010564-\U0001056f\U0001057b\U0001058b\U00010593\U00010596\U000105a2"
    "\U000105b2\U000105ba\U000105bd-\U000105ff\U00010737-\U0001073f"
    "\U00010756-\U0001075f\U00010768-\U0001077f\U00010786\U000107b1"
    "\U000107bb-\U000107ff\U00010806-\U00010807\U00010809\U00010836"
    "\U00010839-\U0001083b\U0001083d-\U0001083e\U00010856\U00010877-\U00010878"
    "\U0001089f-\U000108a6\U000108b0-\U000108df\U000108f3\U000108f6-\U000108fa"
    "\U0001091c-\U0001091e\U0001093a-\U0001093e\U00010940-\U0001097f"
    "\U000109b8-\U000109bb\U000109d0-\U000109d1\U00010a04\U00010a07-\U00010a0b"
    "\U00010a14\U00010a18\U00010a36-\U00010a37\U00010a3b-\U00010a3e"
    "\U00010a49-\U00010a4f\U00010a59-\U00010a5f\U00010aa0-\U00010abf\U00010ac8"
    "\U00010ae5-\U00010aea\U00010af0-\U00010aff\U00010b36-\U00010b38"
    "\U00010b56-\U00010b57\U00010b73-\U00010b77\U00010b92-\U00010ba8"
    "\U00010bb0-\U00010bff\U00010c49-\U00010c7f\U00010cb3-\U00010cbf"
    "\U00010cf3-\U00010cf9\U00010d24-\U00010d2f\U00010d3a-\U00010e5f\U00010e7f"
    "\U00010eaa-\U00010eaf\U00010eb2-\U00010eff\U00010f28-\U00010f2f"
    "\U00010f46-\U00010f50\U00010f55-\U00010f6f\U00010f82-\U00010faf"
    "\U00010fcc-\U00010fdf\U00010ff7-\U00010fff\U0001104e-\U00011051\U00011070"
    "\U00011073-\U00011074\U00011076-\U0001107f\U000110c2-\U000110cf"
    "\U000110e9-\U000110ef\U000110fa-\U000110ff\U00011135\U00011145-\U00011146"
    "\U00011148-\U0001114f\U00011173-\U00011175\U00011177-\U0001117f"
    "\U000111c9-\U000111cf\U000111db\U000111dd-\U000111e0\U000111f5-\U000111ff"
    "\U00011212\U0001122c-\U0001127f\U00011287\U00011289\U0001128e\U0001129e"
    "\U000112a9-\U000112af\U000112df-\U000112ef\U000112fa-\U00011304"
    "\U0001130d-\U0001130e\U00011311-\U00011312\U00011329\U00011331\U00011334"
    "\U0001133a-\U0001133c\U0001133e-\U0001134f\U00011351-\U0001135c"
    "\U00011362-\U000113ff\U00011435-\U00011446\U0001144b-\U0001144f"
    "\U0001145a-\U0001145e\U00011462-\U0001147f\U000114b0-\U000114c3\U000114c6"
    "\U000114c8-\U000114cf\U000114da-\U0001157f\U000115af-\U000115d7"
    "\U000115dc-\U000115ff\U00011630-\U00011643\U00011645-\U0001164f"
    "\U0001165a-\U0001167f\U000116b9-\U000116bf\U000116ca-\U000116ff"
    "\U0001171b-\U0001172f\U0001173c-\U0001173f\U00011747-\U000117ff"
    "\U0001182c-\U0001189f\U000118f3-\U000118fe\U00011907-\U00011908"
    "\U0001190a-\U0001190b\U00011914\U00011917\U00011930-\U0001193e\U00011940"
    "\U00011942-\U0001194f\U0001195a-\U0001199f\U000119a8-\U000119a9"
    "\U000119d1-\U000119e0\U000119e2\U000119e4-\U000119ff\U00011a01-\U00011a0a"
    "\U00011a33-\U00011a39\U00011a3b-\U00011a4f\U00011a51-\U00011a5b"
    "\U00011a8a-\U00011a9c\U00011a9e-\U00011aaf\U00011af9-\U00011bff\U00011c09"
    "\U00011c2f-\U00011c3f\U00011c41-\U00011c4f\U00011c6d-\U00011c71"
    "\U00011c90-\U00011cff\U00011d07\U00011d0a\U00011d31-\U00011d45"
    "\U00011d47-\U00011d4f\U00011d5a-\U00011d5f\U00011d66\U00011d69"
    "\U00011d8a-\U00011d97\U00011d99-\U00011d9f\U00011daa-\U00011edf"
    "\U00011ef3-\U00011faf\U00011fb1-\U00011fbf\U00011fd5-\U00011fff"
    "\U0001239a-\U000123ff\U0001246f\U00012474-\U0001247f\U00012544-\U00012f8f"
    "\U00012ff1-\U00012fff\U0001342f-\U000143ff\U00014647-\U000167ff"
    "\U00016a39-\U00016a3f\U00016a5f\U00016a6a-\U00016a6f\U00016abf"
    "\U00016aca-\U00016acf\U00016aee-\U00016aff\U00016b30-\U00016b3f"
    "\U00016b44-\U00016b4f\U00016b5a\U00016b62\U00016b78-\U00016b7c"
    "\U00016b90-\U00016e3f\U00016e97-\U00016eff\U00016f4b-\U00016f4f"
    "\U00016f7f-\U00016f8e\U00016fa0-\U00016fdf\U00016fe2\U00016fe4-\U00016fff"
    "\U000187f8-\U000187ff\U00018cd6-\U00018cff\U00018d09-\U0001afef\U0001aff4"
    "\U0001affc\U0001afff\U0001b123-\U0001b14f\U0001b153-\U0001b163"
    "\U0001b168-\U0001b16f\U0001b2fc-\U0001bbff\U0001bc6b-\U0001bc6f"
    "\U0001bc7d-\U0001bc7f\U0001bc89-\U0001bc8f\U0001bc9a-\U0001cfff"
    "\U0001d0f6-\U0001d0ff\U0001d127-\U0001d128\U0001d1de-\U0001d1ff"
    "\U0001d246-\U0001d2df\U0001d2f4-\U0001d2ff\U0001d357-\U0001d35f"
    "\U0001d379-\U0001d3ff\U0001d455\U0001d49d\U0001d4a0-\U0001d4a1"
    "\U0001d4a3-\U0001d4a4\U0001d4a7-\U0001d4a8\U0001d4ad\U0001d4ba\U0001d4bc"
    "\U0001d4c4\U0001d506\U0001d50b-\U0001d50c\U0001d515\U0001d51d\U0001d53a"
    "\U0001d53f\U0001d545\U0001d547-\U0001d549\U0001d551\U0001d6a6-\U0001d6a7"
    "\U0001d7cc-\U0001d7cd\U0001d800-\U0001deff\U0001df1f-\U0001e0ff"
    "\U0001e12d-\U0001e136\U0001e13e-\U0001e13f\U0001e14a-\U0001e14d"
    "\U0001e14f-\U0001e28f\U0001e2ae-\U0001e2bf\U0001e2ec-\U0001e2ef"
    "\U0001e2fa-\U0001e7df\U0001e7e7\U0001e7ec\U0001e7ef\U0001e7ff"
    "\U0001e8c5-\U0001e8c6\U0001e8d0-\U0001e8ff\U0001e944-\U0001e94a"
    "\U0001e94c-\U0001e94f\U0001e95a-\U0001ec70\U0001ecac\U0001ecb0"
    "\U0001ecb5-\U0001ed00\U0001ed2e\U0001ed3e-\U0001edff\U0001ee04\U0001ee20"
    "\U0001ee23\U0001ee25-\U0001ee26\U0001ee28\U0001ee33\U0001ee38\U0001ee3a"
    "\U0001ee3c-\U0001ee41\U0001ee43-\U0001ee46\U0001ee48\U0001ee4a\U0001ee4c"
    "\U0001ee50\U0001ee53\U0001ee55-\U0001ee56\U0001ee58\U0001ee5a\U0001ee5c"
    "\U0001ee5e\U0001ee60\U0001ee63\U0001ee65-\U0001ee66\U0001ee6b\U0001ee73"
    "\U0001ee78\U0001ee7d\U0001ee7f\U0001ee8a\U0001ee9c-\U0001eea0\U0001eea4"
    "\U0001eeaa\U0001eebc-\U0001eeef\U0001eef2-\U0001efff\U0001f02c-\U0001f02f"
    "\U0001f094-\U0001f09f\U0001f0af-\U0001f0b0\U0001f0bf-\U0001f0c0\U0001f0d0"
    "\U0001f0e0-\U0001f0ff\U0001f10d-\U0001f10f\U0001f12f\U0001f16c-\U0001f16f"
    "\U0001f19b-\U0001f1e5\U0001f203-\U0001f20f\U0001f23b-\U0001f23f"
    "\U0001f249-\U0001f24f\U0001f252-\U0001f2ff\U0001f321-\U0001f32f\U0001f336"
    "\U0001f37d-\U0001f37f\U0001f394-\U0001f39f\U0001f3c5\U0001f3cb-\U0001f3df"
    "\U0001f3f1-\U0001f3ff\U0001f43f\U0001f441\U0001f4f8\U0001f4fd-\U0001f4ff"
    "\U0001f53e-\U0001f53f\U0001f544-\U0001f54f\U0001f568-\U0001f5fa"
    "\U0001f641-\U0001f644\U0001f650-\U0001f67f\U0001f6c6-\U0001f6ff"
    "\U0001f774-\U0001fbef\U0001fbfa-\U0001ffff\U0002a6e0-\U0002a6ff"
    "\U0002b739-\U0002b73f\U0002b81e-\U0002b81f\U0002cea2-\U0002ceaf"
    "\U0002ebe1-\U0002f7ff\U0002fa1e-\U0002ffff\U0003134b-\U000e0000"
    "\U000e0002-\U000e001f\U000e0080-\U000e00ff\U000e01f0-\U0010ffff"
)
#: Separators to SQLite, token characters by Python's tables.
SEPARATORS = "\u19b0-\u19c0\u19c8-\u19c9\u1cf2-\u1cf3"
#: Characters SQLite folds otherwise (or not at all) than Python's tables do.
FOLDED = {
    "\u01e0": "\u01e1",
    "\u01e1": "\u01e1",
    "\u037f": "\u037f",
    "\u0528": "\u0528",
    "\u052a": "\u052a",
    "\u052c": "\u052c",
    "\u052e": "\u052e",
    "\u13f8": "\u13f8",
    "\u13f9": "\u13f9",
    "\u13fa": "\u13fa",
    "\u13fb": "\u13fb",
    "\u13fc": "\u13fc",
    "\u13fd": "\u13fd",
    "\u1c80": "\u1c80",
    "\u1c81": "\u1c81",
    "\u1c82": "\u1c82",
    "\u1c83": "\u1c83",
    "\u1c84": "\u1c84",
    "\u1c85": "\u1c85",
    "\u1c86": "\u1c86",
    "\u1c87": "\u1c87",
    "\u1c88": "\u1c88",
    "\u1c90": "\u1c90",
    "\u1c91": "\u1c91",
    "\u1c92": "\u1c92",
    "\u1c93": "\u1c93",
    "\u1c94": "\u1c94",
    "\u1c95": "\u1c95",
    "\u1c96": "\u1c96",
    "\u1c97": "\u1c97",
    "\u1c98": "\u1c98",
    "\u1c99": "\u1c99",
    "\u1c9a": "\u1c9a",
    "\u1c9b": "\u1c9b",
    "\u1c9c": "\u1c9c",
    "\u1c9d": "\u1c9d",
    "\u1c9e": "\u1c9e",
    "\u1c9f": "\u1c9f",
    "\u1ca0": "\u1ca0",
    "\u1ca1": "\u1ca1",
    "\u1ca2": "\u1ca2",
    "\u1ca3": "\u1ca3",
    "\u1ca4": "\u1ca4",
    "\u1ca5": "\u1ca5",
    "\u1ca6": "\u1ca6",
    "\u1ca7": "\u1ca7",
    "\u1ca8": "\u1ca8",
    "\u1ca9": "\u1ca9",
    "\u1caa": "\u1caa",
    "\u1cab": "\u1cab",
    "\u1cac": "\u1cac",
    "\u1cad": "\u1cad",
    "\u1cae": "\u1cae",
    "\u1caf": "\u1caf",
    "\u1cb0": "\u1cb0",
    "\u1cb1": "\u1cb1",
    "\u1cb2": "\u1cb2",
    "\u1cb3": "\u1cb3",
    "\u1cb4": "\u1cb4",
    "\u1cb5": "\u1cb5",
    "\u1cb6": "\u1cb6",
    "\u1cb7": "\u1cb7",
    "\u1cb8": "\u1cb8",
    "\u1cb9": "\u1cb9",
    "\u1cba": "\u1cba",
    "\u1cbd": "\u1cbd",
    "\u1cbe": "\u1cbe",
    "\u1cbf": "\u1cbf",
    "\u2c2f": "\u2c2f",
    "\ua698": "\ua698",
    "\ua69a": "\ua69a",
    "\ua796": "\ua796",
    "\ua798": "\ua798",
    "\ua79a": "\ua79a",
    "\ua79c": "\ua79c",
    "\ua79e": "\ua79e",
    "\ua7ab": "\ua7ab",
    "\ua7ac": "\ua7ac",
    "\ua7ad": "\ua7ad",
    "\ua7ae": "\ua7ae",
    "\ua7b0": "\ua7b0",
    "\ua7b1": "\ua7b1",
    "\ua7b2": "\ua7b2",
    "\ua7b3": "\ua7b3",
    "\ua7b4": "\ua7b4",
    "\ua7b6": "\ua7b6",
    "\ua7b8": "\ua7b8",
    "\ua7ba": "\ua7ba",
    "\ua7bc": "\ua7bc",
    "\ua7be": "\ua7be",
    "\ua7c0": "\ua7c0",
    "\ua7c2": "\ua7c2",
    "\ua7c4": "\ua7c4",
    "\ua7c5": "\ua7c5",
    "\ua7c6": "\ua7c6",
    "\ua7c7": "\ua7c7",
    "\ua7c9": "\ua7c9",
    "\ua7d0": "\ua7d0",
    "\ua7d6": "\ua7d6",
    "\ua7d8": "\ua7d8",
    "\ua7f5": "\ua7f5",
    "\uab70": "\uab70",
    "\uab71": "\uab71",
    "\uab72": "\uab72",
    "\uab73": "\uab73",
    "\uab74": "\uab74",
    "\uab75": "\uab75",
    "\uab76": "\uab76",
    "\uab77": "\uab77",
    "\uab78": "\uab78",
    "\uab79": "\uab79",
    "\uab7a": "\uab7a",
    "\uab7b": "\uab7b",
    "\uab7c": "\uab7c",
    "\uab7d": "\uab7d",
    "\uab7e": "\uab7e",
    "\uab7f": "\uab7f",
    "\uab80": "\uab80",
    "\uab81": "\uab81",
    "\uab82": "\uab82",
    "\uab83": "\uab83",
    "\uab84": "\uab84",
    "\uab85": "\uab85",
    "\uab86": "\uab86",
    "\uab87": "\uab87",
    "\uab88": "\uab88",
    "\uab89": "\uab89",
    "\uab8a": "\uab8a",
    "\uab8b": "\uab8b",
    "\uab8c": "\uab8c",
    "\uab8d": "\uab8d",
    "\uab8e": "\uab8e",
    "\uab8f": "\uab8f",
    "\uab90": "\uab90",
    "\uab91": "\uab91",
    "\uab92": "\uab92",
    "\uab93": "\uab93",
    "\uab94": "\uab94",
    "\uab95": "\uab95",
    "\uab96": "\uab96",
    "\uab97": "\uab97",
    "\uab98": "\uab98",
    "\uab99": "\uab99",
    "\uab9a": "\uab9a",
    "\uab9b": "\uab9b",
    "\uab9c": "\uab9c",
    "\uab9d": "\uab9d",
    "\uab9e": "\uab9e",
    "\uab9f": "\uab9f",
    "\uaba0": "\uaba0",
    "\uaba1": "\uaba1",
    "\uaba2": "\uaba2",
    "\uaba3": "\uaba3",
    "\uaba4": "\uaba4",
    "\uaba5": "\uaba5",
    "\uaba6": "\uaba6",
    "\uaba7": "\uaba7",
    "\uaba8": "\uaba8",
    "\uaba9": "\uaba9",
    "\uabaa": "\uabaa",
    "\uabab": "\uabab",
    "\uabac": "\uabac",
    "\uabad": "\uabad",
    "\uabae": "\uabae",
    "\uabaf": "\uabaf",
    "\uabb0": "\uabb0",
    "\uabb1": "\uabb1",
    "\uabb2": "\uabb2",
    "\uabb3": "\uabb3",
    "\uabb4": "\uabb4",
    "\uabb5": "\uabb5",
    "\uabb6": "\uabb6",
    "\uabb7": "\uabb7",
    "\uabb8": "\uabb8",
    "\uabb9": "\uabb9",
    "\uabba": "\uabba",
    "\uabbb": "\uabbb",
    "\uabbc": "\uabbc",
    "\uabbd": "\uabbd",
    "\uabbe": "\uabbe",
    "\uabbf": "\uabbf",
}
